"""The control API: JSON over HTTP/1.1 on the Unix socket ``<home>/run/gateway.sock``.

Routes (the contract with the CLI): ``GET /v1/status``, ``POST /v1/messages`` (NDJSON
stream: accepted, deltas/progress, then reply or timeout; see `gateway.control.protocol`;
``POST /v1/ui/messages`` the same for the web panel's ``ui:NAME`` sessions),
``GET /v1/messages/{id}``, ``GET /v1/watch/{session}``, ``GET /v1/sessions`` (``channel``,
``q`` and ``limit`` filter it),
``GET /v1/sessions/{key}``, ``GET /v1/config``, memory (`gateway.control.memory`),
approvals (`gateway.control.approvals`), ``GET /v1/system`` and ``POST /v1/trust/allow``
(`gateway.system_routes`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import re
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web
from pydantic import ValidationError

from channels.cli import CliChannel
from channels.ui import UiChannel
from core.app import CoreApp
from core.errors import FamiliarError, StoreError
from core.session_keys import check_session_key
from core.session_search import SessionSearch
from core.sessions import SessionInfo
from gateway.config import FamiliarConfig
from gateway.control.approvals import add_approval_routes
from gateway.control.mcp_report import mcp_report
from gateway.control.memory import add_memory_routes
from gateway.control.messages import MessageRoutes, error
from gateway.control.protocol import MAX_BODY_BYTES
from gateway.control.requests import ReadRequest, validation_message
from gateway.control.tasks import add_task_routes
from gateway.control.todos import add_todo_routes
from gateway.http_errors import body_checks, store_error_status
from gateway.masking import masked_config
from gateway.process_table import gateway_pid
from gateway.provider_detect import ProviderChoice
from gateway.undelivered import sweep_stranded, undelivered_report

__all__ = ["DEFAULT_BACKLOG", "ControlServer", "ControlState", "build_control_app"]

log = logging.getLogger(__name__)

_UNIX_PATH_MAX = 107
_TRUE = frozenset({"1", "true", "yes", "on"})
_MAX_LISTED = 1000
_MAX_QUERY = 200
_CHANNEL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
DEFAULT_BACKLOG = 4096
"""Pending connections the socket queues: thousands of senders may connect at once.
Linux caps it at ``net.core.somaxconn`` (4096 by default since 5.4)."""

_TOO_LARGE_HINT = "send a shorter text, or put it in a workspace file and ask about that file"

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass(kw_only=True)
class ControlState:
    """What the control API reports on and works with (the daemon keeps it current)."""

    home: Path
    workspace: Path
    config: FamiliarConfig
    core: CoreApp
    cli: CliChannel
    ui: UiChannel = field(default_factory=UiChannel)
    """The web panel's channel (``ui:NAME`` sessions)."""
    provider: ProviderChoice | None
    version: str
    store_url: str
    channels: Callable[[], list[dict[str, Any]]] = list
    """Per channel: ``name``, ``state`` (``starting`` | ``running`` | ``failed`` |
    ``stopped``), ``error``, ``retry_in`` (seconds) and ``restarts``."""
    """Channel name -> ``starting`` | ``running`` | ``failed`` | ``stopped``."""
    http_address: str | None = None
    started: float = field(default_factory=time.monotonic)
    processes: Callable[[], Awaitable[list[dict[str, Any]]]] | None = None
    """The gateway's processes: ``role``, ``pid``, ``state``, ``restarts``, ``started_at``."""
    runs_agent: bool = True
    """Whether turns run in this process (else busy sessions are counted from the queue)."""


@web.middleware
async def _json_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        return error(exc.status, exc.reason)
    except FamiliarError as exc:
        log.warning("control request failed path=%s error=%s", request.path, exc)
        status = store_error_status(exc) if isinstance(exc, StoreError) else 500
        return error(status, str(exc))


def build_control_app(
    state: ControlState, *, extra_routes: Iterable[Callable[[web.Application], None]] = ()
) -> web.Application:
    """The aiohttp application of the control API, bound to ``state``.

    Args:
        state: what the routes report on and work with.
        extra_routes: functions that add more routes (e.g. the schedule routes).
    """
    app = web.Application(
        client_max_size=MAX_BODY_BYTES,
        middlewares=[_json_errors, body_checks(too_large_hint=_TOO_LARGE_HINT)],
    )
    api = _ControlApi(state)
    app.router.add_get("/v1/status", api.status)
    app.router.add_get("/v1/messages/{id}", api.message)
    app.router.add_get("/v1/sessions", api.sessions)
    MessageRoutes(cli=state.cli, ui=state.ui, bus=state.core.bus, hub=state.core.hub).add_to(app)
    app.router.add_post("/v1/sessions/{key:.+}/read", api.read)
    app.router.add_get("/v1/sessions/{key:.+}", api.session)
    app.router.add_get("/v1/config", api.config)
    add_memory_routes(app, state.core.memory)
    add_task_routes(app, state.core.tasks, state.core.sessions)
    add_approval_routes(app, state.core.approvals, state.core.bus)
    if state.core.orchestration is not None:
        add_todo_routes(app, state.core.orchestration.todos)
    for add_routes in extra_routes:
        add_routes(app)
    app.cleanup_ctx.append(sweep_stranded(state.core.store, state.config))
    return app


class _ControlApi:
    def __init__(self, state: ControlState) -> None:
        self._s = state

    async def status(self, _request: web.Request) -> web.Response:
        s = self._s
        store = s.core.store
        queue = await s.core.bus.queue_counts()
        processes = await s.processes() if s.processes is not None else []
        return web.json_response(
            {
                "pid": gateway_pid(processes),
                "version": s.version,
                "uptime_s": round(time.monotonic() - s.started, 3),
                "home": str(s.home),
                "workspace": str(s.workspace),
                "store": "sqlite" if store.is_sqlite else "postgresql",
                "store_health": (await store.health.check()).as_json(),
                "provider": s.provider.as_json() if s.provider else None,
                "channels": s.channels(),
                "sessions": await s.core.sessions.count(),
                "queue": {"pending": queue.pending, "claimed": queue.claimed},
                "busy_sessions": (s.core.runtime.busy_sessions if s.runs_agent else queue.claimed),
                "processes": processes,
                "exec_sandbox": await self._exec_sandbox(),
                "http": s.http_address,
                "undelivered": await undelivered_report(store, s.config),
                # MCP servers run beside the turns: in the agent processes (which publish
                # their view in the store) when the gateway runs several.
                "mcp": await mcp_report(s.core, runs_agent=s.runs_agent, processes=processes),
                "store_schema": store.schema,
                "group": await s.core.group.report() if s.core.group is not None else None,
            }
        )

    async def _exec_sandbox(self) -> dict[str, Any] | None:
        """Where this gateway runs ``exec`` commands (None when exec is disabled)."""
        exec_config = self._s.config.tools.exec
        if not exec_config.enabled:
            return None
        choice = await self._s.core.exec_runner.sandbox()
        return {**choice.as_json(), "network": exec_config.network}

    async def message(self, request: web.Request) -> web.Response:
        message_id = request.match_info["id"]
        found = await self._s.core.bus.message_status(message_id)
        if found is None:
            return error(404, f"unknown message {message_id!r}")
        return web.json_response(found.as_json())

    async def sessions(self, request: web.Request) -> web.Response:
        """Newest first; ``channel`` (one channel's), ``q`` (key or any message contains
        it) and ``limit`` (1-1000) narrow the list; ``channels`` names every channel."""
        query = request.query
        channel = query.get("channel") or None
        text = query.get("q", "").strip() or None
        try:
            limit = int(query.get("limit", "1000"))
        except ValueError:
            limit = 0
        if not 1 <= limit <= _MAX_LISTED:
            return error(400, f"limit must be a whole number from 1 to {_MAX_LISTED}")
        if text is not None and len(text) > _MAX_QUERY:
            return error(400, f"q is at most {_MAX_QUERY} characters")
        if channel is not None and not _CHANNEL_NAME.fullmatch(channel):
            return error(400, f"{channel[:80]!r} is not a channel name")
        search = SessionSearch(store=self._s.core.store)
        found = await search.find(channel=channel, text=text, limit=limit)
        listed = await self._with_queued(found)
        return web.json_response(
            {
                "sessions": [info.as_json() for info in listed],
                "channels": await search.channels(),
            }
        )

    async def _with_queued(self, infos: list[SessionInfo]) -> list[SessionInfo]:
        queued = await self._s.core.bus.queued_by_session([i.key for i in infos])
        return [dataclasses.replace(i, pending=queued.get(i.key, 0)) for i in infos]

    async def session(self, request: web.Request) -> web.Response:
        key = request.match_info["key"]
        try:
            check_session_key(key)
        except ValueError as exc:
            return error(400, str(exc))
        services = self._s.core
        found = await services.sessions.info(key)
        if found is None:
            return error(404, f"unknown session {key!r}")
        (info,) = await self._with_queued(
            await SessionSearch(store=services.store).with_unread([found])
        )
        history = []
        if request.query.get("history", "1").lower() in _TRUE:
            history = await services.sessions.all_history(key)
        unread = await services.sessions.unread(key)
        events = []
        if request.query.get("events", "").lower() in _TRUE:
            of_message = request.query.get("message_id") or None
            listed = await services.events.list(key, message_id=of_message)
            events = [e.as_json() for e in listed]
        return web.json_response(
            {
                "session": info.as_json(),
                "history": [m.as_json() for m in history],
                "unread": [u.as_json() for u in unread],
                "events": events,
            }
        )

    async def read(self, request: web.Request) -> web.Response:
        """``POST /v1/sessions/{key}/read`` ``{"upto": id}``: mark unread replies read."""
        key = request.match_info["key"]
        try:
            check_session_key(key)
        except ValueError as exc:
            return error(400, str(exc))
        try:
            body = ReadRequest.model_validate_json(await request.read())
        except ValidationError as exc:
            return error(400, validation_message(exc))
        marked = await self._s.core.sessions.mark_read(key, upto=body.upto)
        return web.json_response({"session": key, "marked_read": marked})

    async def config(self, _request: web.Request) -> web.Response:
        s = self._s
        return web.json_response(
            masked_config(s.config, store_url=s.store_url, workspace=s.workspace)
        )


class ControlServer:
    """Serves the control app on a Unix socket with mode 0600."""

    def __init__(
        self,
        app: web.Application,
        path: Path,
        *,
        shutdown_timeout: float = 5.0,
        backlog: int = DEFAULT_BACKLOG,
    ) -> None:
        self.path = path
        self._backlog = backlog
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=shutdown_timeout)
        self._site: web.UnixSite | None = None

    async def start(self) -> None:
        """Listen (replacing a stale socket file: the caller holds the gateway lock).

        Raises:
            OSError: the path is too long for a Unix socket or cannot be bound.
        """
        if len(os.fsencode(self.path)) > _UNIX_PATH_MAX:
            raise OSError(
                f"control socket path is too long for a Unix socket ({self.path}); "
                "use a shorter FAMILIAR_HOME"
            )
        await asyncio.to_thread(self.path.unlink, missing_ok=True)
        await self._runner.setup()
        self._site = web.UnixSite(self._runner, str(self.path), backlog=self._backlog)
        await self._site.start()
        # The run directory is 0700 too, so the short window before chmod exposes nothing.
        await asyncio.to_thread(os.chmod, self.path, 0o600)

    async def stop_listening(self) -> None:
        """Accept no new connections; requests in flight go on."""
        if self._site is not None:
            await self._site.stop()
            self._site = None

    async def close(self) -> None:
        """Finish (or, after the shutdown timeout, cancel) requests and remove the socket."""
        await self.stop_listening()
        await self._runner.cleanup()
        await asyncio.to_thread(self.path.unlink, missing_ok=True)
