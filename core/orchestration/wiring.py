"""Builds the orchestration services the core wires in: todos, modes, waiting, consolidation."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from core.commands import CommandRouter
from core.events import EventLog
from core.memory.service import MemoryService
from core.orchestration.background import BackgroundWaiter
from core.orchestration.commands import register_orchestration_commands
from core.orchestration.consolidate import REM_AGENT, Consolidator, consolidation_tools
from core.orchestration.idle import IdleConsolidator
from core.orchestration.modes import SessionModes
from core.orchestration.todo_tool import todo_tools
from core.orchestration.todos import TodoStore
from core.sessions import SessionStore
from core.store.engine import Store
from core.tasks.orchestration_agents import CONSOLIDATE_TOOL
from core.tasks.registry import TaskRegistry
from core.tools.base import Tool
from core.tools.policy import ToolPolicy

__all__ = ["Orchestration", "build_orchestration", "orchestration_tools"]


@dataclass(frozen=True, kw_only=True)
class Orchestration:
    """The orchestration services of one core."""

    todos: TodoStore
    modes: SessionModes
    waiter: BackgroundWaiter
    consolidator: Consolidator
    idle: IdleConsolidator
    registry: TaskRegistry

    @property
    def reserved_tools(self) -> dict[str, str]:
        """Tools only one agent type is offered."""
        return {CONSOLIDATE_TOOL: REM_AGENT}

    @property
    def tool_services(self) -> tuple[object, ...]:
        """What its tools take from the tool deps."""
        return (self.todos, self.consolidator)

    def register_commands(
        self, commands: CommandRouter, *, workspace: Path, policy: ToolPolicy | None = None
    ) -> None:
        """``/review``, ``/research``, ``/fleet``, ``/autopilot``, ``/subconscious`` (after
        ``/status``, which they extend); ``policy``: the tool policy, which ``/subconscious``
        follows as a ``sessions_spawn`` call would."""
        register_orchestration_commands(
            commands,
            workspace=workspace,
            modes=self.modes,
            registry=self.registry,
            todos=self.todos,
            policy=policy,
        )


def orchestration_tools() -> list[Tool]:
    """``todo`` and ``memory_consolidate``."""
    return [*todo_tools(), *consolidation_tools()]


def build_orchestration(
    *,
    store: Store,
    events: EventLog,
    sessions: SessionStore,
    memory: MemoryService,
    registry: TaskRegistry,
) -> Orchestration:
    todos = TodoStore(store=store, events=events)
    modes = SessionModes(store=store, events=events)
    config = memory.config
    return Orchestration(
        todos=todos,
        modes=modes,
        waiter=BackgroundWaiter(store=store, registry=registry, todos=todos),
        consolidator=Consolidator(
            memory=memory,
            sessions=sessions,
            events=events,
            tasks=registry.repo,
            global_channels=config.consolidate_global_channels,
        ),
        idle=IdleConsolidator(
            period=config.consolidate_after_idle,
            sessions=sessions,
            modes=modes,
            registry=registry,
        ),
        registry=registry,
    )
