"""The Tool protocol and the context a tool runs in."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

__all__ = ["Tool", "ToolContext"]


@dataclass(frozen=True, kw_only=True)
class ToolContext:
    """What a running tool may know about where it runs. Hidden from the model."""

    workspace: Path
    session_key: str
    channel: str = ""
    message_id: str = ""
    depth: int = 0
    """0 for the main agent; n for a subagent n levels down."""
    agent_type: str = "main"
    extras: dict[str, Any] = field(default_factory=dict)
    """Services wired in by the runtime (scheduler, task registry...), by name."""


@runtime_checkable
class Tool(Protocol):
    """A tool the model can call.

    ``run`` returns the text result given back to the model. It raises
    :class:`core.errors.ToolRetry` / :class:`core.errors.ToolFailed` for failures the
    model should see; the runner turns those (and argument validation errors) into
    tool results instead of crashing the turn.
    """

    name: str
    description: str
    parameters: dict[str, Any]
    """JSON schema of the arguments object."""

    async def run(self, ctx: ToolContext, arguments: dict[str, Any]) -> str:
        """Validate ``arguments`` and run."""
        ...
