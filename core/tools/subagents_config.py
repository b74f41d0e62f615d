"""SubagentsConfig: the ``[tools.subagents]`` section (caps, memory share mode, waits)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["MEMORY_SHARE_MODES", "MemoryShareMode", "SubagentsConfig"]

MemoryShareMode = Literal["isolated", "handoff", "inherit-readonly"]
MEMORY_SHARE_MODES: tuple[str, ...] = ("isolated", "handoff", "inherit-readonly")


class SubagentsConfig(BaseModel):
    """The ``[tools.subagents]`` section.

    Attributes:
        enabled: offer ``sessions_spawn``, ``subagents`` and ``agents_list`` at all.
        max_depth: how deep subagents may nest (the main agent is depth 0).
        max_concurrent: subagents running at once (idle multi-turn ones do not count).
        memory_share_mode: ``isolated``, ``handoff`` (default) or ``inherit-readonly``;
            a custom agent may override it.
        inherit_turns: user turns of the parent's recent context an ``inherit-readonly``
            child sees (read-only, in its prompt).
        sync_timeout: seconds a ``sync`` spawn (or ``send`` with ``wait``) waits for the
            answer before it returns and leaves the agent running in the background.
        result_max_chars: characters of a child's answer given back to the parent (the
            rest is cut with a marker; ``subagents read`` shows it all).
    """

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    max_depth: int = Field(default=6, ge=1, le=32)
    max_concurrent: int = Field(default=8, ge=1, le=256)
    memory_share_mode: MemoryShareMode = "handoff"
    inherit_turns: int = Field(default=10, ge=0, le=200)
    sync_timeout: float = Field(default=1800.0, gt=0)
    result_max_chars: int = Field(default=20_000, ge=200)
