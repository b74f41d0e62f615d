"""Control API routes for schedules: create, list and cancel on ``/v1/schedules``."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

from aiohttp import web

from core.errors import CommandError
from core.messages import Delivery
from core.scheduling import ScheduleService, validate_spec
from core.session_keys import DEFAULT_CLI_KEY, check_session_key

__all__ = ["DEFAULT_SESSION", "DeliveryCheck", "add_schedule_routes"]

log = logging.getLogger(__name__)

DEFAULT_SESSION = DEFAULT_CLI_KEY

DeliveryCheck = Callable[[str, Delivery], str | None]
"""Why replies to a session (key, delivery) could not be delivered; None: they can."""


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": message}, status=status)


def _text_field(body: dict[str, Any], name: str, *, default: str | None = None) -> str:
    value = body.get(name, default)
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"'{name}' must be a non-empty string")
    return value


def add_schedule_routes(
    app: web.Application, service: ScheduleService, check: DeliveryCheck | None = None
) -> None:
    """Add the schedule routes to the control app.

    - ``POST /v1/schedules`` ``{"kind", "spec", "prompt", "session"?, "timezone"?}`` -> 201
      with the schedule, or 400 ``{"error"}`` (the same messages as the slash commands,
      or why replies to that session could not be delivered).
    - ``GET /v1/schedules`` -> ``{"schedules": [...], "timezone"}`` (active ones, each
      with ``next_run`` in UTC and ``next_run_local`` in its own timezone; ``timezone``:
      the one a schedule created without one gets).
    - ``DELETE /v1/schedules/{id}`` -> 200 with the cancelled schedule, or 404.

    Args:
        check: why replies to a session (its key and delivery) could not be delivered
            (None: they can); None checks nothing.
    """
    routes = _ScheduleRoutes(service, check)
    app.router.add_post("/v1/schedules", routes.create)
    app.router.add_get("/v1/schedules", routes.list)
    app.router.add_delete("/v1/schedules/{id}", routes.cancel)


class _ScheduleRoutes:
    def __init__(self, service: ScheduleService, check: DeliveryCheck | None) -> None:
        self._service = service
        self._check = check

    async def create(self, request: web.Request) -> web.Response:
        try:
            body = await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            return _error(400, "the body must be a JSON object")
        if not isinstance(body, dict):
            return _error(400, "the body must be a JSON object")
        try:
            kind = _text_field(body, "kind")
            spec = _text_field(body, "spec")
            prompt = _text_field(body, "prompt")
            session = _text_field(body, "session", default=DEFAULT_SESSION).strip()
            timezone = body.get("timezone")
            if timezone is not None and not isinstance(timezone, str):
                raise ValueError("'timezone' must be a string or null")
            check_session_key(session)
        except ValueError as exc:
            return _error(400, str(exc))
        service = self._service
        try:
            checked = validate_spec(
                kind,
                spec,
                prompt,
                tz=timezone,
                now=service.now(),
                default_tz=service.default_timezone,
            )
        except CommandError as exc:
            return _error(400, str(exc))
        target = await service.target_for(session)
        problem = self._check(session, target.delivery) if self._check is not None else None
        if problem is not None:
            return _error(400, problem)
        try:
            info = await service.create(target, checked)
        except CommandError as exc:
            return _error(400, str(exc))
        return web.json_response(info.as_json(), status=201)

    async def list(self, _request: web.Request) -> web.Response:
        schedules = await self._service.list()
        return web.json_response(
            {
                "schedules": [s.as_json() for s in schedules],
                "timezone": self._service.default_timezone,
            }
        )

    async def cancel(self, request: web.Request) -> web.Response:
        raw = request.match_info["id"].lstrip("#")
        if not raw.isdigit() or len(raw) > 18:
            return _error(404, f"no schedule {request.match_info['id']!r}")
        info = await self._service.cancel(int(raw))
        if info is None:
            return _error(404, f"no active schedule #{raw}")
        return web.json_response(info.as_json())
