"""AgentSpec: one agent type of the catalog (built-in or from a custom agent file)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["AgentSpec"]


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentSpec:
    """An agent type: what it is for, which tools it has, how it shares memory.

    Attributes:
        tools: tool names or fnmatch patterns it may use; None means every tool.
        memory_share_mode: overrides ``tools.subagents.memory_share_mode`` when set.
        model: the model its turns use; None inherits the parent's.
        instructions: put into its system prompt (a custom agent's Markdown body).
        source: the file it was read from (None for a built-in).
        skills: the Agent Skills it sees (a custom agent's ``skills``); None: all.
    """

    name: str
    description: str
    tools: tuple[str, ...] | None = None
    memory_share_mode: str | None = None
    model: str | None = None
    instructions: str = ""
    source: str | None = None
    skills: tuple[str, ...] | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "tools": "all" if self.tools is None else list(self.tools),
            "memory_share_mode": self.memory_share_mode or "default",
            "model": self.model,
            "source": self.source or "built-in",
        }
