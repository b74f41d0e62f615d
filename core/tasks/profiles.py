"""The TurnProfiles of ``subagent:`` sessions: who a child is comes from its record."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from core.agent.services import TurnProfile
from core.tasks.catalog import AgentCatalog
from core.tasks.records import TaskRecord
from core.tasks.repository import TaskRepository
from core.tasks.spec import AgentSpec

__all__ = ["SUBAGENT_PREFIX", "SubagentLifecycle", "SubagentProfiles", "SubagentStartContext"]

SUBAGENT_PREFIX = "subagent:"


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

    def add_start_context(self, provider: SubagentStartContext) -> None:
        """Register a source of extra prompt context for starting subagents (hooks)."""
        self._start_contexts.append(provider)

    async def profile(self, session_key: str) -> TurnProfile | None:
        """The TurnProfile of a session: a child's from its record; for any other
        session the main agent's, listing the custom agents it can start."""
        if not session_key.startswith(SUBAGENT_PREFIX):
            agents = await self._catalog.custom()
            return TurnProfile(agents=agents) if agents else None
        task = await self._repo.by_child_key(session_key)
        if task is None:
            # Published by something other than the registry: a plain depth-1 child
            # (its memory layer treats it as a subagent either way).
            return TurnProfile(agent_type="general-purpose", depth=1)
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
            agents=await self._catalog.custom(),
            read_scopes=(task.owner_key,) if task.memory_mode == "inherit-readonly" else (),
        )

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
