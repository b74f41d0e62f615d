"""The tool names of other tools' agent files, mapped to familiar's tools.

Copilot groups its tools in namespaces (``read/readFile``, ``execute/runInTerminal``)
and toolsets (``read``, ``edit``...), Claude Code names its own (``Read``, ``Bash``),
both write MCP tools their way (``server/tool``, ``mcp__server__tool``). Each name
becomes the familiar tools that do that job; a name that maps to nothing is returned
as unmapped (for ``doctor``, ``familiar agents list`` and one log line), never turned
into the name of an MCP tool that does not exist.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from core.tool_aliases import TODO as _TODO
from core.tool_aliases import TOOL_ALIASES as _ALIASES
from core.tool_aliases import WEB as _WEB
from core.tool_aliases import WEB_FETCH as _WEB_FETCH
from core.tool_aliases import WEB_SEARCH as _WEB_SEARCH
from core.tool_aliases import safe_server_name

__all__ = ["BUILTIN_TOOLS", "MappedTools", "ToolVocabulary", "map_tools"]

BUILTIN_TOOLS = frozenset(
    {
        "read_file",
        "write_file",
        "edit_file",
        "list_dir",
        "resolve_path",
        "exec",
        "task_complete",
        "manage_schedule",
        "remember",
        "recall",
        "forget",
        "sessions_spawn",
        "subagents",
        "agents_list",
        "skill",
        "todo",
        "memory_consolidate",
    }
)
"""familiar's own tools (the runtime also knows the tools plugins add)."""

_NAMESPACES = frozenset({"execute", "read", "edit", "search", "agent", "todo", "web"})
"""Copilot toolsets whose ``<toolset>/<tool>`` names map as the toolset does."""

_WEB_SERVER_WORDS = {
    _WEB_FETCH: ("fetch", "web", "browser", "crawl", "scrape", "http"),
    _WEB_SEARCH: ("search", "web", "browser"),
    _WEB: ("fetch", "web", "browser", "crawl", "scrape", "http", "search"),
}
"""A configured MCP server whose name contains one of these words is where the web
tools of agent files go (every tool of it): ``fetch`` for ``mcp-server-fetch``,
``brave-search``, ``playwright-browser``..."""

_UNSAFE_TOOL = re.compile(r"[^A-Za-z0-9_*-]")


@dataclass(frozen=True, slots=True)
class ToolVocabulary:
    """What agent files' tool names can map to: our tools and the MCP servers configured.

    Attributes:
        tools: familiar's tool names (not MCP ones).
        servers: names of the configured MCP servers.
    """

    tools: frozenset[str] = BUILTIN_TOOLS
    servers: frozenset[str] = field(default_factory=frozenset)

    @classmethod
    def of(cls, tools: Iterable[str], servers: Iterable[str]) -> ToolVocabulary:
        """Built from a registry's names (MCP ones are left out) and server names."""
        ours = frozenset(t for t in tools if not t.startswith("mcp__")) | BUILTIN_TOOLS
        return cls(ours, frozenset(safe_server_name(s) for s in servers))


@dataclass(frozen=True, slots=True)
class MappedTools:
    """An agent file's ``tools`` as familiar's names.

    Attributes:
        tools: tool names or fnmatch patterns; None means every tool.
        unmapped: the names as written that map to no tool of ours.
    """

    tools: tuple[str, ...] | None
    unmapped: tuple[str, ...] = ()


def map_tools(names: Iterable[str], vocabulary: ToolVocabulary) -> MappedTools:
    """Map the names of an agent file's ``tools`` (``*`` anywhere means every tool)."""
    mapped: list[str] = []
    unmapped: list[str] = []
    every = False
    for raw in names:
        name = raw.strip()
        if not name:
            continue
        if name == "*":
            every = True
            continue
        found = _one(name, vocabulary)
        if not found:
            if name not in unmapped:
                unmapped.append(name)
            continue
        mapped.extend(t for t in found if t not in mapped)
    return MappedTools(None if every else tuple(mapped), tuple(unmapped))


def _one(raw: str, vocabulary: ToolVocabulary) -> tuple[str, ...]:
    base = raw.split("(", 1)[0].strip()  # Claude's Agent(worker) / Bash(git *)
    if base in vocabulary.tools:
        return (base,)
    if base.lower() in vocabulary.tools:  # Claude's Skill for a skill tool of ours
        return (base.lower(),)
    if base.startswith("mcp__"):
        server, _, tool = base.removeprefix("mcp__").partition("__")
        return (f"mcp__{server}__{tool or '*'}",) if server else ()
    if "/" in base:
        server, _, tool = base.rpartition("/")
        if safe_server_name(server) in vocabulary.servers:
            return (f"mcp__{safe_server_name(server)}__{_UNSAFE_TOOL.sub('_', tool) or '*'}",)
        toolset = base.split("/", 1)[0].lower()
        return _alias(toolset, vocabulary) if toolset in _NAMESPACES else ()
    return _alias(base.lower(), vocabulary)


def _alias(name: str, vocabulary: ToolVocabulary) -> tuple[str, ...]:
    target = _ALIASES.get(name)
    if target is None:
        return ()
    if isinstance(target, tuple):
        return target
    if target == _TODO:
        return (_TODO,) if _TODO in vocabulary.tools else ()
    words = _WEB_SERVER_WORDS[target]
    servers = sorted(s for s in vocabulary.servers if any(w in s.lower() for w in words))
    return tuple(f"mcp__{s}__*" for s in servers)
