"""Control API routes for approvals: every session's pending ones, and answering one.

An answer from here goes the way a chat answer goes: `ApprovalService.answer_from_outside`
publishes ``/approve ID`` (or ``/deny ID``) into the approval's session with the operator
as its approver, and the session's turn runs (or refuses) the command through the same
`ApprovalService.approve` / `deny` as the typed command.
"""

from __future__ import annotations

from typing import Annotated, Literal

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from core.bus.sql import SqlBus
from core.errors import CommandError
from core.tools.approvals import ApprovalService, parse_approval_id
from gateway.control.messages import error
from gateway.control.requests import validation_message

__all__ = ["OPERATOR_PATTERN", "DecideRequest", "add_approval_routes"]

OPERATOR_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9._@-]{0,63}$"
"""An operator name as the OS gives it (a login name), recorded as ``ui:<name>``: the
names the panel's login accepts (`gateway.ui.auth.OPERATOR_PATTERN`)."""
_DECIDED_MAX = 100
_DEFAULT_WAIT = 10.0


class DecideRequest(BaseModel):
    """The body of ``POST /v1/approvals/{id}``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    decision: Literal["approve", "deny"]
    operator: Annotated[str, Field(pattern=OPERATOR_PATTERN)]
    """Who answers (the OS user that logged in to the control panel)."""
    wait: Annotated[float, Field(ge=0, le=120)] = _DEFAULT_WAIT
    """Seconds to wait for the session to answer (0: return once it is queued)."""


def add_approval_routes(app: web.Application, approvals: ApprovalService, bus: SqlBus) -> None:
    """Add the approval routes to the control app.

    - ``GET /v1/approvals?decided=N`` -> ``{"pending": [...], "decided": [...]}``: every
      session's pending approvals (oldest first; ``command`` verbatim) and the ``N``
      (default 20, at most 100) latest answered or expired ones, newest first.
    - ``GET /v1/approvals/{id}`` -> the approval, or 404.
    - ``POST /v1/approvals/{id}`` ``{"decision": "approve"|"deny", "operator", "wait"?}``
      -> ``{"message_id", "reply": {"kind", "text"} | null, "approval"}`` once the
      session answered (``reply`` null when it did not within ``wait`` seconds: the
      answer stays queued); 404 unknown, 409 no longer pending, 400 a bad body.
    """
    routes = _ApprovalRoutes(approvals, bus)
    app.router.add_get("/v1/approvals", routes.list)
    app.router.add_get("/v1/approvals/{id}", routes.show)
    app.router.add_post("/v1/approvals/{id}", routes.decide)


class _ApprovalRoutes:
    def __init__(self, approvals: ApprovalService, bus: SqlBus) -> None:
        self._approvals = approvals
        self._bus = bus

    async def list(self, request: web.Request) -> web.Response:
        raw = request.query.get("decided", "20")
        if not raw.isdigit() or int(raw) > _DECIDED_MAX:
            return error(400, f"decided must be a whole number from 0 to {_DECIDED_MAX}")
        pending = await self._approvals.pending()
        decided = await self._approvals.decided(limit=int(raw)) if int(raw) else []
        return web.json_response(
            {
                "pending": [a.as_json() for a in pending],
                "decided": [a.as_json() for a in decided],
            }
        )

    async def show(self, request: web.Request) -> web.Response:
        approval_id = _approval_id(request)
        info = None if approval_id is None else await self._approvals.get(approval_id)
        if info is None:
            return error(404, f"no approval {request.match_info['id']!r}")
        return web.json_response(info.as_json())

    async def decide(self, request: web.Request) -> web.Response:
        approval_id = _approval_id(request)
        if approval_id is None:
            return error(404, f"no approval {request.match_info['id']!r}")
        try:
            body = DecideRequest.model_validate_json(await request.read())
        except ValidationError as exc:
            return error(400, validation_message(exc))
        try:
            message = await self._approvals.answer_from_outside(
                approval_id, body.decision, approver=f"ui:{body.operator}"
            )
        except CommandError as exc:
            return error(409, str(exc))
        if message is None:
            return error(404, f"no approval #{approval_id}")
        reply = await self._bus.wait_reply(message.id, body.wait) if body.wait > 0 else None
        info = await self._approvals.get(approval_id)
        return web.json_response(
            {
                "message_id": message.id,
                "reply": None if reply is None else {"kind": reply.kind, "text": reply.text},
                "approval": None if info is None else info.as_json(),
            }
        )


def _approval_id(request: web.Request) -> str | None:
    try:
        return parse_approval_id(request.match_info["id"], usage="")
    except CommandError:
        return None
