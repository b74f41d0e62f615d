"""The control API: JSON over HTTP/1.1 on the Unix socket ``<home>/run/gateway.sock``.

Routes (the contract with the CLI): ``GET /v1/status``, ``POST /v1/messages`` (NDJSON
stream: accepted, deltas/progress, then reply or timeout), ``GET /v1/messages/{id}``,
``GET /v1/sessions``, ``GET /v1/sessions/{key}``, ``GET /v1/config``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from channels.cli import ChannelStopped, CliChannel, _render, parse_session
from core.app import CoreApp
from core.bus.ephemeral import EphemeralHub
from core.errors import FamiliarError
from core.messages import EphemeralMessage, InboundMessage, OutboundMessage
from gateway import queries
from gateway.config import FamiliarConfig
from gateway.provider_detect import ProviderChoice

__all__ = [
    "MASK",
    "ControlServer",
    "ControlState",
    "build_control_app",
    "mask_url",
    "masked_config",
]

log = logging.getLogger(__name__)

MASK = "**********"
_SECRET_KEY = re.compile(r"(?i)(api_?key|token|secret|password|passwd|credential)")
_UNIX_PATH_MAX = 107
_TRUE = frozenset({"1", "true", "yes", "on"})

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass(kw_only=True)
class ControlState:
    """What the control API reports on and works with (the daemon keeps it current)."""

    home: Path
    workspace: Path
    config: FamiliarConfig
    core: CoreApp
    cli: CliChannel
    provider: ProviderChoice | None
    version: str
    store_url: str
    channel_states: dict[str, str] = field(default_factory=dict)
    """Channel name -> ``starting`` | ``running`` | ``failed`` | ``stopped``."""
    http_address: str | None = None
    started: float = field(default_factory=time.monotonic)


@dataclass(frozen=True, slots=True)
class _SendRequest:
    session: str
    text: str
    stream: bool
    timeout: float | None
    autopilot: bool


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": message}, status=status)


def _parse_send(body: Any) -> _SendRequest:
    """Validate a ``POST /v1/messages`` body; ValueError carries a user-facing message."""
    if not isinstance(body, dict):
        raise ValueError("the body must be a JSON object")
    session = body.get("session", "cli:default")
    if not isinstance(session, str):
        raise ValueError("session must be a string like cli:NAME")
    parse_session(session)
    text = body.get("text")
    if text is None:
        raise ValueError("text is required")
    if not isinstance(text, str):
        raise ValueError("text must be a string")
    if not text.strip():
        raise ValueError("text must not be empty")
    flags: dict[str, bool] = {}
    for name, default in (("stream", True), ("autopilot", False)):
        value = body.get(name, default)
        if not isinstance(value, bool):
            raise ValueError(f"{name} must be true or false")
        flags[name] = value
    timeout = body.get("timeout")
    if timeout is not None:
        if isinstance(timeout, bool) or not isinstance(timeout, int | float):
            raise ValueError("timeout must be a number of seconds or null")
        if timeout <= 0:
            raise ValueError("timeout must be positive (or null to wait as long as it takes)")
    return _SendRequest(
        session=session,
        text=text,
        stream=flags["stream"],
        timeout=float(timeout) if timeout is not None else None,
        autopilot=flags["autopilot"],
    )


def _line(payload: dict[str, Any]) -> bytes:
    return (json.dumps(payload, ensure_ascii=False) + "\n").encode()


def masked_config(config: FamiliarConfig, *, store_url: str, workspace: Path) -> dict[str, Any]:
    """The effective config as JSON with every secret replaced by ``MASK``.

    SecretStr fields are masked by pydantic; string values under secret-looking keys
    (plugin channel tables are plain dicts) and passwords inside URLs are masked here.
    """
    data = config.model_dump(mode="json")
    data["workspace"] = str(workspace)
    data.setdefault("store", {})["url"] = mask_url(store_url)
    masked = _mask(data)
    assert isinstance(masked, dict)
    return masked


def _mask(value: Any, key: str = "") -> Any:
    if isinstance(value, dict):
        return {k: _mask(v, str(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [_mask(v, key) for v in value]
    if isinstance(value, str) and value and _SECRET_KEY.search(key):
        return MASK
    return value


def mask_url(url: str) -> str:
    """``url`` with its password (if any) replaced by ``MASK``."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        return MASK
    if parsed.password is None:
        return url
    return parsed.render_as_string(hide_password=True).replace(":***@", f":{MASK}@", 1)


@web.middleware
async def _json_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        return _error(exc.status, exc.reason)
    except FamiliarError as exc:
        log.warning("control request failed path=%s error=%s", request.path, exc)
        return _error(500, str(exc))


def build_control_app(
    state: ControlState, *, extra_routes: Iterable[Callable[[web.Application], None]] = ()
) -> web.Application:
    """The aiohttp application of the control API, bound to ``state``.

    Args:
        state: what the routes report on and work with.
        extra_routes: functions that add more routes (e.g. the schedule routes).
    """
    app = web.Application(middlewares=[_json_errors])
    api = _ControlApi(state)
    app.router.add_get("/v1/status", api.status)
    app.router.add_post("/v1/messages", api.send)
    app.router.add_get("/v1/messages/{id}", api.message)
    app.router.add_get("/v1/sessions", api.sessions)
    app.router.add_get("/v1/watch/{key:.+}", api.watch)
    app.router.add_get("/v1/sessions/{key:.+}", api.session)
    app.router.add_get("/v1/config", api.config)
    for add_routes in extra_routes:
        add_routes(app)
    return app


class _ControlApi:
    def __init__(self, state: ControlState) -> None:
        self._s = state

    async def status(self, _request: web.Request) -> web.Response:
        s = self._s
        store = s.core.store
        queue = await queries.queue_counts(store)
        return web.json_response(
            {
                "pid": os.getpid(),
                "version": s.version,
                "uptime_s": round(time.monotonic() - s.started, 3),
                "home": str(s.home),
                "workspace": str(s.workspace),
                "store": "sqlite" if store.is_sqlite else "postgresql",
                "provider": s.provider.as_json() if s.provider else None,
                "channels": [{"name": n, "state": st} for n, st in s.channel_states.items()],
                "sessions": await queries.session_count(store),
                "queue": {"pending": queue.pending, "claimed": queue.claimed},
                "busy_sessions": s.core.runtime.busy_sessions,
                "http": s.http_address,
            }
        )

    async def send(self, request: web.Request) -> web.StreamResponse:
        try:
            body = await request.json()
        except ValueError:
            return _error(400, "the body must be JSON")
        try:
            ask = _parse_send(body)
        except ValueError as exc:
            return _error(400, str(exc))
        hub = self._s.core.services.hub
        async with _maybe_subscribe(hub, "cli", ask.stream) as queue:
            try:
                message = await self._s.cli.submit(ask.session, ask.text, autopilot=ask.autopilot)
            except ChannelStopped as exc:
                return _error(503, str(exc))
            response = web.StreamResponse(headers={"Content-Type": "application/x-ndjson"})
            try:
                await response.prepare(request)
                accepted = {"type": "accepted", "message_id": message.id, "session": ask.session}
                await response.write(_line(accepted))
                await self._stream_reply(response, message, queue, ask.timeout)
                await response.write_eof()
            except ConnectionResetError:
                log.info("control client went away message_id=%s (reply is kept)", message.id)
            finally:
                self._s.cli.forget(message.id)
        return response

    async def _stream_reply(
        self,
        response: web.StreamResponse,
        message: InboundMessage,
        queue: asyncio.Queue[EphemeralMessage] | None,
        limit: float | None,
    ) -> None:
        waiting = asyncio.ensure_future(self._s.cli.wait_reply(message.id, limit))
        try:
            while queue is not None and not waiting.done():
                getting = asyncio.ensure_future(queue.get())
                try:
                    await asyncio.wait({waiting, getting}, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    getting.cancel()
                if getting.done() and not getting.cancelled():
                    await _write_ephemeral(response, message.id, getting.result())
            while queue is not None and not queue.empty():
                await _write_ephemeral(response, message.id, queue.get_nowait())
            try:
                reply = await waiting
            except ChannelStopped:
                reply = None
        finally:
            waiting.cancel()
        await response.write(_line(_final(message, reply)))

    async def watch(self, request: web.Request) -> web.StreamResponse:
        """NDJSON ``reply`` lines for the session's replies no sender waits for.

        What ``familiar chat`` shows between turns: schedule firings, check-ins.
        """
        key = request.match_info["key"]
        try:
            parse_session(key)
        except ValueError as exc:
            return _error(400, str(exc))
        response = web.StreamResponse(headers={"Content-Type": "application/x-ndjson"})
        await response.prepare(request)
        with contextlib.suppress(ConnectionResetError):
            async with self._s.cli.watch(key) as queue:
                while (reply := await queue.get()) is not None:
                    await response.write(_line(_render(reply)))
        return response

    async def message(self, request: web.Request) -> web.Response:
        message_id = request.match_info["id"]
        found = await queries.message_status(self._s.core.store, message_id)
        if found is None:
            return _error(404, f"unknown message {message_id!r}")
        return web.json_response(found.as_json())

    async def sessions(self, _request: web.Request) -> web.Response:
        listed = await self._s.core.services.sessions.list_sessions()
        return web.json_response({"sessions": [info.as_json() for info in listed]})

    async def session(self, request: web.Request) -> web.Response:
        key = request.match_info["key"]
        services = self._s.core.services
        info = await services.sessions.info(key)
        if info is None:
            return _error(404, f"unknown session {key!r}")
        history = await services.sessions.all_history(key)
        events = []
        if request.query.get("events", "").lower() in _TRUE:
            events = [e.as_json() for e in await services.events.list(key)]
        return web.json_response(
            {
                "session": info.as_json(),
                "history": [{"epoch": e, "role": r, "content": c} for e, r, c in history],
                "events": events,
            }
        )

    async def config(self, _request: web.Request) -> web.Response:
        s = self._s
        return web.json_response(
            masked_config(s.config, store_url=s.store_url, workspace=s.workspace)
        )


@contextlib.asynccontextmanager
async def _maybe_subscribe(
    hub: EphemeralHub, channel: str, wanted: bool
) -> AsyncIterator[asyncio.Queue[EphemeralMessage] | None]:
    if not wanted:
        yield None
        return
    async with hub.subscribe(channel) as queue:
        yield queue


async def _write_ephemeral(
    response: web.StreamResponse, message_id: str, item: EphemeralMessage
) -> None:
    if item.inbound_id == message_id:
        await response.write(_line({"type": item.type, "text": item.text}))


def _final(message: InboundMessage, reply: OutboundMessage | None) -> dict[str, Any]:
    if reply is None:
        return {"type": "timeout", "message_id": message.id, "session": message.session_key}
    return _render(reply)


class ControlServer:
    """Serves the control app on a Unix socket with mode 0600."""

    def __init__(self, app: web.Application, path: Path, *, shutdown_timeout: float = 5.0) -> None:
        self.path = path
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
        self._site = web.UnixSite(self._runner, str(self.path))
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
