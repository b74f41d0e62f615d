"""familiar's MCP side in the gateway: server sources for the client, and ``mcp serve``.

``gateway.mcp.server`` and ``gateway.mcp.http`` load the MCP SDK: import them from
their modules where they are used.
"""

from __future__ import annotations

from .sources import import_paths, resolve_mcp

__all__ = ["import_paths", "resolve_mcp"]
