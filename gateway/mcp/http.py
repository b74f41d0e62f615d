"""``familiar mcp serve --http``: the MCP server over streamable HTTP, behind a bearer token."""

from __future__ import annotations

import hmac
import json
import logging
import socket

import uvicorn
from mcp.server.mcpserver import MCPServer
from starlette.types import ASGIApp, Receive, Scope, Send

from core.errors import ConfigError
from core.mcp import McpServeConfig

__all__ = ["BearerGate", "http_app", "serve_http"]

log = logging.getLogger(__name__)


class BearerGate:
    """ASGI middleware: HTTP requests without ``Authorization: Bearer <token>`` get 401."""

    def __init__(self, app: ASGIApp, *, token: str) -> None:
        self._app = app
        self._expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not self._allowed(scope):
            body = json.dumps({"error": "missing or bad bearer token"}).encode()
            await send(
                {
                    "type": "http.response.start",
                    "status": 401,
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"www-authenticate", b'Bearer realm="familiar"'),
                        (b"content-length", str(len(body)).encode()),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return
        await self._app(scope, receive, send)

    def _allowed(self, scope: Scope) -> bool:
        given = next((v for k, v in scope["headers"] if k == b"authorization"), b"")
        return hmac.compare_digest(given, self._expected)


def http_app(server: MCPServer, config: McpServeConfig) -> ASGIApp:
    """The streamable HTTP app of ``server`` at ``config.path``, behind the token.

    Raises:
        ConfigError: ``mcp.server.token`` is not set.
    """
    if config.token is None or not config.token.get_secret_value():
        raise ConfigError(
            "serving MCP over HTTP needs a token: set [mcp.server] token "
            "(or FAMILIAR_MCP__SERVER__TOKEN)",
            key="mcp.server.token",
        )
    app = server.streamable_http_app(streamable_http_path=config.path, host=config.host)
    return BearerGate(app, token=config.token.get_secret_value())


async def serve_http(
    server: MCPServer, config: McpServeConfig, *, sock: socket.socket | None = None
) -> None:
    """Serve until cancelled, on ``sock`` (closed at the end) or ``config.host``:``config.port``.

    Raises:
        ConfigError: no token is configured.
    """
    app = http_app(server, config)
    if sock is None:
        sock = socket.create_server((config.host, config.port))
    host, port = sock.getsockname()[:2]
    log.info("mcp server listening on http://%s:%s%s", host, port, config.path)
    web = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    with sock:
        await web.serve(sockets=[sock])
