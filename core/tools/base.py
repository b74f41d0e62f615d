"""The Tool protocol and the context a tool runs in (its typed dependencies included)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar, runtime_checkable

from core.messages import InboundMessage

from .lineage import Ancestor, Lineage
from .restrictions import ToolRestrictions

__all__ = ["NO_CAPACITY_HANDOVER", "Capacity", "Tool", "ToolContext", "ToolDeps"]

T = TypeVar("T")


class ToolDeps:
    """Services a tool may ask for by type (a ``Dep[T]`` parameter), wired by the core.

    Looked up by exact type first, then by subclass, so a test can hand in a subclass.
    """

    def __init__(self, *services: object) -> None:
        self._services: dict[type[Any], object] = {}
        for service in services:
            self.add(service)

    def add(self, service: object) -> None:
        self._services[type(service)] = service

    def get(self, kind: type[T]) -> T | None:
        found = self._services.get(kind)
        if found is None:
            found = next((s for s in self._services.values() if isinstance(s, kind)), None)
        return found if isinstance(found, kind) else None


class Capacity(Protocol):
    """A running turn's share of ``agent.max_concurrent_sessions``.

    A tool that waits on work in another session (a sync subagent) waits inside
    ``released()``: the turn's slot goes back to the runtime meanwhile, so a parent
    holding a slot can never starve the child it waits for.
    """

    def released(self) -> AbstractAsyncContextManager[None]: ...


class _NoHandover:
    @contextlib.asynccontextmanager
    async def released(self) -> AsyncIterator[None]:
        yield


NO_CAPACITY_HANDOVER: Capacity = _NoHandover()
"""For tools run outside the agent runtime (tests, the MCP server): nothing to give back."""


@dataclass(frozen=True, kw_only=True)
class ToolContext:
    """What a running tool may know about where it runs. Hidden from the model."""

    workspace: Path
    session_key: str
    channel: str = ""
    message_id: str = ""
    message: InboundMessage | None = None
    """The message being answered (None outside a turn)."""
    depth: int = 0
    """0 for the main agent; n for a subagent n levels down."""
    agent_type: str = "main"
    tool_allow: tuple[str, ...] | None = None
    """A subagent's own tool list (names or fnmatch patterns); None: no restriction
    beyond the policy."""
    read_scopes: tuple[str, ...] = ()
    """Memory scopes this session may also read, never write (an ``inherit-readonly``
    subagent reads its parent's)."""
    lineage: Lineage | None = None
    """A subagent's chain up to the session that started it; None for a root session
    (one a person or a caller talks to, whose own channel is the root channel)."""
    deps: ToolDeps = field(default_factory=ToolDeps)
    capacity: Capacity = NO_CAPACITY_HANDOVER
    skills: tuple[str, ...] | None = None
    """The Agent Skills this agent may load (a custom agent's ``skills``); None: all."""
    restrictions: ToolRestrictions = field(default_factory=ToolRestrictions)
    """Tool lists that bind the rest of this message's calls once added (an active
    skill's ``allowed-tools``)."""

    @property
    def root_channel(self) -> str:
        """The channel of the session that started this chain of delegation (for a root
        session its own channel): the channel whose rules bind every subagent below it."""
        return self.lineage.root_channel if self.lineage is not None else self.channel

    @property
    def root_session_key(self) -> str:
        """The session that started this chain (for a root session itself)."""
        return self.lineage.root_key if self.lineage is not None else self.session_key

    @property
    def root_is_local_cli(self) -> bool:
        """Whether the chain was started by the operator on this host (``familiar chat``
        or ``send``), at any depth of subagents; False for Slack, Teams, webhooks..."""
        if self.lineage is not None:
            return self.lineage.root_is_local_cli
        return Lineage(self.session_key, self.channel).root_is_local_cli

    @property
    def ancestors(self) -> tuple[Ancestor, ...]:
        """The agents above this one, the root's first (empty for a root session)."""
        return self.lineage.ancestors if self.lineage is not None else ()


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

    @property
    def parameters(self) -> dict[str, Any]:
        """JSON schema of the arguments object."""
        ...

    async def run(self, ctx: ToolContext, arguments: dict[str, Any]) -> str:
        """Validate ``arguments`` and run."""
        ...
