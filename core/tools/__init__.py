"""Tools the model can call: the protocol, ``@tool``, registry, policy and built-ins."""

from __future__ import annotations

from .base import Tool, ToolContext
from .config import (
    DEFAULT_DANGER_PATTERNS,
    ApprovalMode,
    ExecConfig,
    PolicyRule,
    ToolPolicyConfig,
    ToolsConfig,
)
from .danger import DangerMatcher, normalise_command
from .decorator import FunctionTool, tool
from .exec import ApprovalGate, ExecRunner, exec_tools
from .fs import fs_tools
from .policy import ToolPolicy
from .registry import ToolRegistry, ToolResult
from .workspace_paths import resolve_in_workspace

__all__ = [
    "DEFAULT_DANGER_PATTERNS",
    "ApprovalGate",
    "ApprovalMode",
    "DangerMatcher",
    "ExecConfig",
    "ExecRunner",
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
    "normalise_command",
    "resolve_in_workspace",
    "tool",
]
