"""MCP client: the tools of configured MCP servers, offered as ``mcp__<server>__<tool>``."""

from __future__ import annotations

from .config import McpConfig, McpServeConfig, McpServerConfig, Transport
from .connection import McpConnection, ServerState
from .imports import expand, parse_mcp_json, safe_server_name
from .manager import McpManager, ServerStatus
from .tools import McpTool, render_result, tool_name

__all__ = [
    "McpConfig",
    "McpConnection",
    "McpManager",
    "McpServeConfig",
    "McpServerConfig",
    "McpTool",
    "ServerState",
    "ServerStatus",
    "Transport",
    "expand",
    "parse_mcp_json",
    "render_result",
    "safe_server_name",
    "tool_name",
]
