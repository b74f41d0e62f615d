"""AgentSpec: one agent type of the catalog (built-in or from a custom agent file)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["AgentSpec"]


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentSpec:
    """An agent type: what it is for, which tools it has, how it shares memory.

    Attributes:
        name: its id (``agent_type`` of ``sessions_spawn``): the file's ``name`` when
            that is a valid id, else the file name (as Copilot does).
        display_name: the ``name`` written in its file when that is not the id
            (``C# Expert``), shown beside the id.
        tools: tool names or fnmatch patterns it may use; None means every tool.
        unmapped_tools: names in its file's ``tools`` that map to no tool of ours.
        memory_share_mode: overrides ``tools.subagents.memory_share_mode`` when set.
        model: the provider model id its turns use; None: its parent's model.
        requested_model: the ``model`` written in its file, before ``[models]``.
        instructions: put into its system prompt (a custom agent's Markdown body).
        source: the file it was read from (None for a built-in).
        notes: what of its file was read leniently or ignored (e.g. not strict YAML).
        skills: the Agent Skills it sees (a custom agent's ``skills``); None: all.
    """

    name: str
    description: str
    display_name: str | None = None
    tools: tuple[str, ...] | None = None
    unmapped_tools: tuple[str, ...] = ()
    memory_share_mode: str | None = None
    model: str | None = None
    requested_model: str | None = None
    instructions: str = ""
    source: str | None = None
    skills: tuple[str, ...] | None = None
    notes: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        """The id, with the display name when there is one (``csharp (C# Expert)``)."""
        return f"{self.name} ({self.display_name})" if self.display_name else self.name

    def as_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "display_name": self.display_name,
            "description": self.description,
            "tools": "all" if self.tools is None else list(self.tools),
            "memory_share_mode": self.memory_share_mode or "default",
            "model": self.model,
            "source": self.source or "built-in",
        }
