"""MCP client: the tools of configured MCP servers, offered as ``mcp__<server>__<tool>``.

This package only exports the light parts (config, ``mcp.json`` parsing); the parts
that load the MCP SDK are imported from their modules (``core.mcp.manager``,
``core.mcp.connection``, ``core.mcp.tools``; ``core.mcp.hosting`` with the task bridge,
elicitation and sampling), so reading config stays fast.
"""

from __future__ import annotations

from .config import McpConfig, McpServeConfig, McpServerConfig, Transport
from .imports import expand, parse_mcp_json, safe_server_name

__all__ = [
    "McpConfig",
    "McpServeConfig",
    "McpServerConfig",
    "Transport",
    "expand",
    "parse_mcp_json",
    "safe_server_name",
]
