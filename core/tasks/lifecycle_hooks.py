"""``subagentStart`` and ``subagentStop`` for the task registry's children."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

from core.events import Event, EventLog
from core.hooks.service import HookOutcome, Hooks
from core.tasks.records import TaskRecord
from core.tools.base import ToolContext

__all__ = ["SubagentHooks"]

log = logging.getLogger(__name__)


class SubagentHooks:
    """Fires the subagent hooks for `TaskRegistry` (a `SubagentLifecycle`).

    ``subagentStart`` context becomes a section of the child's system prompt (asked
    once per agent). ``subagentStop`` is a notice: its hooks see the child's answer, but
    a block does not give the child another turn (it is recorded as ``hook.blocked`` in
    the parent's log), since the parent may already be holding that answer.
    """

    def __init__(self, *, hooks: Hooks, workspace: Path, events: EventLog) -> None:
        self._hooks = hooks
        self._workspace = workspace
        self._events = events

    def _parent(self, task: TaskRecord) -> ToolContext:
        return ToolContext(
            workspace=self._workspace,
            session_key=task.owner_key,
            channel=task.owner_key.partition(":")[0],
            depth=max(task.depth - 1, 0),
        )

    async def _record(self, task: TaskRecord, outcome: HookOutcome) -> None:
        if outcome.events:
            await self._events.append(
                *(Event(session_key=task.owner_key, data=data) for data in outcome.events)
            )

    async def start_context(self, task: TaskRecord) -> Sequence[str]:
        outcome = await self._hooks.subagent_start(
            parent=self._parent(task),
            child_session_key=task.child_key,
            agent_type=task.agent_type,
            prompt=task.prompt,
        )
        await self._record(task, outcome)
        text = outcome.context_text
        return [f"## Context from the subagentStart hooks\n\n{text}"] if text.strip() else []

    async def stopped(self, task: TaskRecord, response: str) -> None:
        outcome = await self._hooks.subagent_stop(
            parent=self._parent(task),
            child_session_key=task.child_key,
            agent_type=task.agent_type,
            response=response,
        )
        await self._record(task, outcome)
        if outcome.block is not None:
            log.info(
                "subagentStop hook blocked agent_id=%s; subagents take no extra turn from it",
                task.id,
            )
