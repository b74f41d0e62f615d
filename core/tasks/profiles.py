"""The TurnProfiles of ``subagent:`` sessions: who a child is comes from its record."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from core.agent.services import TurnProfile
from core.messages import Delivery
from core.tasks.catalog import AgentCatalog
from core.tasks.records import TaskRecord
from core.tasks.repository import TaskRepository
from core.tasks.spec import AgentSpec
from core.tools.lineage import Ancestor, Lineage

__all__ = ["SUBAGENT_PREFIX", "SubagentLifecycle", "SubagentProfiles", "SubagentStartContext"]

SUBAGENT_PREFIX = "subagent:"
_UNKNOWN_ROOT_CHANNEL = "subagent"
"""The root channel of a chain whose top cannot be found: no channel's rules are
loosened for it, and it is never the local CLI."""
_MAX_CHAINS = 4096
_MAX_CHAIN = 64
"""A chain longer than this is a loop in the records (depth is capped far below)."""


@dataclass(frozen=True, slots=True)
class _Chain:
    """The fixed part of a child's lineage: its root and its ancestors' agent types."""

    root_key: str
    root_channel: str
    ancestor_types: tuple[str, ...]


class SubagentStartContext(Protocol):
    """Adds context to a subagent's prompt when it starts (the ``subagentStart`` hook).

    Asked once per agent and process (the answer is kept for the agent's later turns);
    each string becomes a section of the child's system prompt.
    """

    async def start_context(self, task: TaskRecord) -> Sequence[str]: ...


class SubagentLifecycle(SubagentStartContext, Protocol):
    """The ``subagentStart`` context plus ``subagentStop``: told once when a child's
    answer is recorded."""

    async def stopped(self, task: TaskRecord, response: str) -> None: ...


class SubagentProfiles:
    """Agent type, depth, tools, model, prompt sections and readable memory of a child.

    Every ``subagent:`` turn asks (one indexed read); a cancelled agent's queued work is
    refused here, without a model call.
    """

    def __init__(self, *, repo: TaskRepository, catalog: AgentCatalog) -> None:
        self._repo = repo
        self._catalog = catalog
        self._start_contexts: list[SubagentStartContext] = []
        self._started_context: dict[str, tuple[str, ...]] = {}
        self._chains: dict[str, _Chain] = {}
        """Root and ancestors by task id: a record's owner never changes."""

    def add_start_context(self, provider: SubagentStartContext) -> None:
        """Register a source of extra prompt context for starting subagents (hooks)."""
        self._start_contexts.append(provider)

    async def profile(self, session_key: str) -> TurnProfile | None:
        """The TurnProfile of a session: a child's from its record; for any other
        session the main agent's, listing the agents it can start."""
        if not session_key.startswith(SUBAGENT_PREFIX):
            listing = await self._catalog.listing()
            return TurnProfile(agents=listing) if any(a.group for a in listing) else None
        task = await self._repo.by_child_key(session_key)
        if task is None:
            # Published by something other than the registry: a plain depth-1 child
            # (its memory layer treats it as a subagent either way) of no known root.
            unknown = Lineage(session_key, _UNKNOWN_ROOT_CHANNEL, (Ancestor("main"),))
            return TurnProfile(agent_type="general-purpose", depth=1, lineage=unknown)
        if task.status == "cancelled":
            return TurnProfile(
                agent_type=task.agent_type,
                depth=task.depth,
                refuse=f"subagent {task.id} was cancelled",
            )
        spec = await self._catalog.get(task.agent_type)
        if spec is None:
            return TurnProfile(
                agent_type=task.agent_type,
                depth=task.depth,
                refuse=f"agent type {task.agent_type!r} no longer exists in the catalog",
            )
        lineage = await self.lineage(task)
        if isinstance(lineage, str):
            return TurnProfile(agent_type=task.agent_type, depth=task.depth, refuse=lineage)
        sections = [_identity(task, spec)]
        if task.snapshot:
            sections.append(
                "## Your parent's recent conversation (read-only snapshot)\n\n" + task.snapshot
            )
        sections.extend(await self._start_context(task))
        return TurnProfile(
            agent_type=task.agent_type,
            depth=task.depth,
            tools=spec.tools,
            model=task.model,
            instructions=tuple(sections),
            agents=await self._catalog.listing(),
            read_scopes=(task.owner_key,) if task.memory_mode == "inherit-readonly" else (),
            lineage=lineage,
            skills=spec.skills,
        )

    async def lineage(self, task: TaskRecord) -> Lineage | str:
        """The chain above ``task``: the root session, its channel and every agent between.

        Read from the records (the parent's of each child up to the first one, whose
        delivery is the root message's), so it holds across restarts and processes.
        The ancestors' tool lists are those of their agent types now, like the child's
        own. Returns the refusal text when an ancestor's agent type is gone.
        """
        chain = self._chains.get(task.id)
        if chain is None:
            chain = await self._chain(task)
            if len(self._chains) >= _MAX_CHAINS:
                self._chains.clear()
            self._chains[task.id] = chain
        ancestors = [Ancestor("main")]
        for agent_type in chain.ancestor_types:
            spec = await self._catalog.get(agent_type)
            if spec is None:
                return (
                    f"agent type {agent_type!r} of an agent above subagent {task.id} no "
                    "longer exists in the catalog"
                )
            ancestors.append(Ancestor(agent_type, spec.tools))
        return Lineage(chain.root_key, chain.root_channel, tuple(ancestors))

    async def _chain(self, task: TaskRecord) -> _Chain:
        types: list[str] = []
        top = task
        while top.owner_key.startswith(SUBAGENT_PREFIX):
            parent = await self._repo.by_child_key(top.owner_key)
            if parent is None or len(types) >= _MAX_CHAIN:
                return _Chain(top.owner_key, _UNKNOWN_ROOT_CHANNEL, tuple(reversed(types)))
            types.append(parent.agent_type)
            top = parent
        root_channel = Delivery.model_validate_json(top.delivery).channel
        return _Chain(top.owner_key, root_channel, tuple(reversed(types)))

    async def _start_context(self, task: TaskRecord) -> tuple[str, ...]:
        """The one place where hooks add to a starting child's prompt (``subagentStart``)."""
        if not self._start_contexts:
            return ()
        found = self._started_context.get(task.id)
        if found is None:
            parts: list[str] = []
            for provider in self._start_contexts:
                parts.extend(s for s in await provider.start_context(task) if s.strip())
            found = self._started_context[task.id] = tuple(parts)
        return found


def _identity(task: TaskRecord, spec: AgentSpec) -> str:
    lines = [
        "## You are a subagent",
        "",
        f"You are subagent {task.id} of type {spec.name} (depth {task.depth}), started by "
        f"session {task.owner_key}. You do not see its conversation; your final answer is "
        "handed back to it, so make it complete and self-contained. You cannot write into "
        "your parent's memory or history.",
    ]
    if task.description:
        lines.append(f"Task: {task.description}")
    if spec.instructions:
        lines += ["", spec.instructions]
    return "\n".join(lines)
