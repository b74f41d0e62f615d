"""The Approvals page: every session's pending ``exec`` approvals, answered by the operator.

The list comes from ``GET /v1/approvals`` and stays live (`gateway.ui.polling`). An
answer is ``POST /v1/approvals/{id}`` as the logged-in operator: the gateway puts
``/approve <id>`` (or ``/deny``) into the asking conversation, recorded as decided by
``ui:<operator>``, and the page shows the conversation's confirmation (what ran, its
exit code) or why it was refused.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from aiohttp import web

from core.tools.approvals.display import escaped_if_hidden
from gateway.control.client import ControlError
from gateway.ui.polling import push_changes
from gateway.ui.render import render, render_text, session_of
from gateway.ui.routes import EventStream, UiRoutes, after_action
from gateway.ui.shown import clock_text

__all__ = ["DecidedView", "PendingView", "add_routes"]

_WAIT = 10.0
"""Seconds an answer waits for the conversation's confirmation before saying it is queued."""
_SHORT = 120
_DECISIONS = ("approve", "deny")


@dataclass(frozen=True, slots=True)
class PendingView:
    """A pending approval as the page shows it: the command whole and verbatim, or
    escaped (as a JSON string) when it holds invisible or control characters."""

    id: str
    session: str
    session_href: str
    channel: str
    reason: str
    command: str
    escaped: bool
    length: int
    digest: str
    intact: bool
    requested: str
    expires: str

    @classmethod
    def of(cls, row: dict[str, Any]) -> PendingView:
        command = str(row["command"])
        shown = escaped_if_hidden(command)
        return cls(
            id=str(row["id"]),
            session=str(row["session"]),
            session_href=_session_href(str(row["session"])),
            channel=str(row["channel"]),
            reason=str(row["reason"]),
            command=shown,
            escaped=shown != command,  # escaping always adds the quotes
            length=len(command),
            digest=str(row.get("command_sha256") or "")[:16],
            intact=bool(row.get("intact")),
            requested=clock_text(_parse(row["requested_at"])),
            expires=clock_text(_parse(row["expires_at"])),
        )


@dataclass(frozen=True, slots=True)
class DecidedView:
    """An answered or expired approval: the start of its command and who decided it."""

    id: str
    session: str
    session_href: str
    command: str
    status: str
    decided_by: str
    decided: str

    @classmethod
    def of(cls, row: dict[str, Any]) -> DecidedView:
        command = escaped_if_hidden(str(row["command"]))
        if len(command) > _SHORT:
            command = command[: _SHORT - 1] + "…"
        decided_at = row.get("decided_at")
        return cls(
            id=str(row["id"]),
            session=str(row["session"]),
            session_href=_session_href(str(row["session"])),
            command=command,
            status=str(row["status"]),
            decided_by=str(row.get("decided_by") or "—"),
            decided="" if decided_at is None else clock_text(_parse(decided_at)),
        )


def _parse(value: Any) -> datetime:
    return datetime.fromisoformat(str(value)).astimezone(UTC)


def _session_href(key: str) -> str:
    return f"/ui/sessions?key={quote(key, safe='')}"


def add_routes(ui: UiRoutes) -> None:
    """``/ui/approvals`` (page), ``/ui/approvals/live`` (SSE), ``POST /ui/approvals/{id}``."""
    page = _ApprovalsPage(ui)
    ui.page("/approvals", page.page)
    ui.stream("/approvals/live", page.live)
    ui.action("/approvals/{id:[A-Za-z0-9#]{1,20}}", page.decide)


class _ApprovalsPage:
    def __init__(self, ui: UiRoutes) -> None:
        self._ui = ui

    async def _lists(self) -> dict[str, Any]:
        async with self._ui.client() as client:
            found = await client.approvals(decided=20)
        # Absolute times only: the live list is sent again only when something changed.
        return {
            "pending": [PendingView.of(row) for row in found.get("pending", [])],
            "decided": [DecidedView.of(row) for row in found.get("decided", [])],
        }

    async def page(self, request: web.Request) -> web.Response:
        return render(request, "approvals.html", title="Approvals", **await self._lists())

    async def live(self, request: web.Request, stream: EventStream) -> None:
        async def fragment() -> str:
            return render_text(request, "approvals/_lists.html", **await self._lists())

        def failed(why: str) -> str:
            return render_text(request, "approvals/_unavailable.html", why=why)

        await push_changes(stream, fragment, failed)

    async def decide(self, request: web.Request) -> web.StreamResponse:
        form = await request.post()
        decision = form.get("decision")
        if decision not in _DECISIONS:
            return web.Response(status=400, text="the decision must be approve or deny")
        approval_id = request.match_info["id"].lstrip("#").lower()
        operator = session_of(request).operator
        try:
            async with self._ui.client() as client:
                answer = await client.decide_approval(
                    approval_id, str(decision), operator=operator, wait=_WAIT
                )
        except ControlError as exc:
            if exc.status >= 500:
                raise
            return web.Response(status=exc.status, text=f"Not done: {exc.reason}")
        approval = answer.get("approval") or {}
        session = str(approval.get("session", ""))
        fragment = render(
            request,
            "approvals/_result.html",
            approval_id=approval_id,
            decision=decision,
            reply=answer.get("reply"),
            approval_status=str(approval.get("status", "")),
            session=session,
            session_href=_session_href(session),
        )
        return after_action(request, redirect="/ui/approvals", fragment=fragment)
