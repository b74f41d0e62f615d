"""Tools the model can call: the protocol, ``@tool``, registry, policy and built-ins."""

from __future__ import annotations

from .base import Tool, ToolContext
from .config import DEFAULT_DENY_PATTERNS, ExecConfig, PolicyRule, ToolPolicyConfig, ToolsConfig
from .decorator import FunctionTool, tool
from .exec import exec_tools
from .fs import fs_tools
from .policy import ToolPolicy
from .registry import ToolRegistry, ToolResult
from .workspace_paths import resolve_in_workspace

__all__ = [
    "DEFAULT_DENY_PATTERNS",
    "ExecConfig",
    "FunctionTool",
    "PolicyRule",
    "Tool",
    "ToolContext",
    "ToolPolicy",
    "ToolPolicyConfig",
    "ToolRegistry",
    "ToolResult",
    "ToolsConfig",
    "exec_tools",
    "fs_tools",
    "resolve_in_workspace",
    "tool",
]
