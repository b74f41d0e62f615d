"""Other clients' tool names (Claude Code's ``Read``, Copilot's ``execute``...) -> familiar's.

One table for agent files' ``tools`` (`core.tasks.agent_tools`) and skills'
``allowed-tools`` (`core.skills.parse`), and how an MCP server's name appears in its
tools' names (`safe_server_name`).
"""

from __future__ import annotations

import re

__all__ = [
    "TODO",
    "TOOL_ALIASES",
    "WEB",
    "WEB_FETCH",
    "WEB_SEARCH",
    "fixed_alias",
    "safe_server_name",
]

_READ = ("read_file", "list_dir", "resolve_path")
_EDIT = ("write_file", "edit_file")
_EXEC = ("exec",)
_SEARCH = ("list_dir",)
_AGENT = ("sessions_spawn", "subagents", "agents_list")
_MEMORY = ("remember", "recall", "forget")
WEB_FETCH, WEB_SEARCH, WEB = "web-fetch", "web-search", "web"
TODO = "todo"
"""Rules resolved by the caller: to the MCP servers that fetch or search, and to ``todo``."""

TOOL_ALIASES: dict[str, tuple[str, ...] | str] = {
    # Copilot toolsets and Claude Code's names (case-insensitive, as Copilot's aliases)
    **dict.fromkeys(("execute", "shell", "bash", "powershell", "runinterminal"), _EXEC),
    **dict.fromkeys(("runcommands", "terminal"), _EXEC),
    **dict.fromkeys(("read", "view", "notebookread", "readfile"), _READ),
    **dict.fromkeys(("edit", "write", "multiedit", "create", "notebookedit"), _EDIT),
    **dict.fromkeys(("editfiles", "createfile"), _EDIT),
    **dict.fromkeys(("search", "grep", "glob", "codebase", "findfiles"), _SEARCH),
    **dict.fromkeys(("agent", "custom-agent", "task", "runsubagent"), _AGENT),
    "memory": _MEMORY,
    **dict.fromkeys(("todo", "todowrite", "todos"), TODO),
    **dict.fromkeys(("webfetch", "fetch"), WEB_FETCH),
    "websearch": WEB_SEARCH,
    "web": WEB,
}
"""Lower-case tool names and toolsets -> familiar tools, or a rule the caller resolves."""


def fixed_alias(name: str) -> tuple[str, ...]:
    """The familiar tools ``name`` (any case) stands for; () for a rule or an unknown name."""
    target = TOOL_ALIASES.get(name.lower())
    return target if isinstance(target, tuple) else ()


_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def safe_server_name(name: str) -> str:
    """``name`` with every character outside ``A-Za-z0-9_-`` replaced by ``_``."""
    return _UNSAFE.sub("_", name) or "_"
