"""AsgiMount: the MCP SDK's ASGI app served by a route of the gateway's aiohttp server.

The SDK's streamable HTTP transport is an ASGI app; the gateway's HTTP server is
aiohttp. This adapter translates one request at a time (the body is read whole: MCP
requests are small JSON, capped by the app's ``client_max_size``; the response streams,
so SSE answers and the long-lived GET stream work), and runs the app's lifespan in one
task of its own (its task group must be entered and left in the same task).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from aiohttp import web
from starlette.types import ASGIApp, Message

__all__ = ["AsgiMount"]

log = logging.getLogger(__name__)

_HOP_BY_HOP = frozenset({"connection", "keep-alive", "transfer-encoding", "upgrade"})
_DISCONNECT_POLL = 0.5
"""How often a streaming response checks whether its client went away."""


class AsgiMount:
    """Serve ``app`` from aiohttp: `start` before serving, `handle` as the route, `stop`."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app
        self._lifespan: asyncio.Task[None] | None = None
        self._to_app: asyncio.Queue[Message] = asyncio.Queue()
        self._started = asyncio.Event()
        self._stopped = asyncio.Event()
        self._failure: str | None = None

    async def start(self) -> None:
        """Run the app's lifespan startup.

        Raises:
            RuntimeError: the app reported a failed startup.
        """
        self._lifespan = asyncio.create_task(self._run_lifespan(), name="mcp-lifespan")
        await self._to_app.put({"type": "lifespan.startup"})
        await self._started.wait()
        if self._failure is not None:
            raise RuntimeError(f"the MCP endpoint did not start: {self._failure}")

    async def stop(self) -> None:
        """Run the lifespan shutdown and end its task."""
        if self._lifespan is None:
            return
        await self._to_app.put({"type": "lifespan.shutdown"})
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(5.0):
                await self._stopped.wait()
        self._lifespan.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._lifespan
        self._lifespan = None

    async def _run_lifespan(self) -> None:
        async def send(message: Message) -> None:
            kind = message["type"]
            if kind.endswith(".failed"):
                self._failure = str(message.get("message") or kind)
            if kind.startswith("lifespan.startup"):
                self._started.set()
            elif kind.startswith("lifespan.shutdown"):
                self._stopped.set()

        try:
            await self._app(
                {"type": "lifespan", "asgi": {"version": "3.0"}}, self._to_app.get, send
            )
        except Exception as exc:
            log.exception("the MCP endpoint's lifespan failed")
            self._failure = self._failure or f"{type(exc).__name__}: {exc}"
        finally:
            self._started.set()
            self._stopped.set()

    async def handle(self, request: web.Request) -> web.StreamResponse:
        """The aiohttp handler: one ASGI HTTP call of the app."""
        body = await request.read()
        exchange = _Exchange(request, body)
        await self._app(_scope(request), exchange.receive, exchange.send)
        return await exchange.finish()


def _scope(request: web.Request) -> dict[str, Any]:
    peer = request.transport.get_extra_info("peername") if request.transport else None
    sock = request.transport.get_extra_info("sockname") if request.transport else None
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": f"{request.version.major}.{request.version.minor}",
        "method": request.method,
        "scheme": request.scheme,
        "path": request.path,
        "raw_path": request.raw_path.split("?", 1)[0].encode("latin-1"),
        "query_string": request.query_string.encode("latin-1"),
        "root_path": "",
        "headers": [(k.lower(), v) for k, v in request.raw_headers],
        "client": tuple(peer[:2]) if peer else None,
        "server": tuple(sock[:2]) if sock else None,
    }


class _Exchange:
    """One request's ``receive`` and ``send``, and the aiohttp response they build."""

    def __init__(self, request: web.Request, body: bytes) -> None:
        self._request = request
        self._body: bytes | None = body
        self._response: web.StreamResponse | None = None
        self._done = asyncio.Event()

    async def receive(self) -> Message:
        if self._body is not None:
            body, self._body = self._body, None
            return {"type": "http.request", "body": body, "more_body": False}
        while not self._done.is_set() and not self._gone():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(_DISCONNECT_POLL):
                    await self._done.wait()
        return {"type": "http.disconnect"}

    def _gone(self) -> bool:
        transport = self._request.transport
        return transport is None or transport.is_closing()

    async def send(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            response = web.StreamResponse(status=message["status"])
            for name, value in message.get("headers", []):
                key = name.decode("latin-1")
                if key.lower() not in _HOP_BY_HOP:
                    response.headers.add(key, value.decode("latin-1"))
            self._response = response
            await response.prepare(self._request)
        elif message["type"] == "http.response.body" and self._response is not None:
            try:
                await self._response.write(message.get("body", b""))
            except ConnectionError:
                self._done.set()  # the client went away: receive() says disconnect
                return
            if not message.get("more_body", False):
                self._done.set()

    async def finish(self) -> web.StreamResponse:
        self._done.set()
        if self._response is None:
            return web.Response(status=500, text="the MCP endpoint sent no response")
        with contextlib.suppress(ConnectionError):
            await self._response.write_eof()
        return self._response
