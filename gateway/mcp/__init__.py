"""familiar's MCP side in the gateway: server sources for the client, and ``mcp serve``.

``gateway.mcp.server`` and ``gateway.mcp.http`` load the MCP SDK: import them from
their modules where they are used.
"""

from __future__ import annotations

from .sources import McpSources, UntrustedMcpFile, import_paths, read_mcp, resolve_mcp

__all__ = ["McpSources", "UntrustedMcpFile", "import_paths", "read_mcp", "resolve_mcp"]
