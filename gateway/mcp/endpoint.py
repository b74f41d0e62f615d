"""``/mcp`` on the gateway's HTTP port: the MCP server behind its token, in the daemon."""

from __future__ import annotations

from pathlib import Path

from aiohttp import web

from gateway.config import FamiliarConfig

from .http import http_app
from .mount import AsgiMount
from .server import build_mcp_server

__all__ = ["mount_mcp_endpoint"]


async def mount_mcp_endpoint(
    app: web.Application, *, home: Path, config: FamiliarConfig
) -> AsgiMount:
    """Mount ``mcp.server.path`` on ``app`` and start it; stop the returned mount last.

    The tools talk to this gateway over its control socket, as ``familiar mcp serve``
    does, so a message takes the same durable path as one sent from the CLI.

    Raises:
        ConfigError: ``mcp.server.token`` is not set.
    """
    serve = config.mcp.server.model_copy(update={"host": config.http.host})
    mount = AsgiMount(http_app(build_mcp_server(home, serve), serve))
    app.router.add_route("*", serve.path, mount.handle)
    await mount.start()
    return mount
