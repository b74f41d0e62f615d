"""The ``/tasks`` slash command: this session's subagents and their status."""

from __future__ import annotations

import time

from core.commands import CommandRouter
from core.errors import CommandError, TaskRefused
from core.messages import InboundMessage
from core.tasks.records import TaskRecord
from core.tasks.registry import TaskRegistry

__all__ = ["describe_task", "register_task_commands"]


def describe_task(task: TaskRecord, *, now: float | None = None) -> str:
    """One line for a task: id, type, status, progress, what it does."""
    age = max(0, int((now if now is not None else time.time()) - task.created_at))
    what = task.description or task.prompt
    what = " ".join(what.split())
    what = what if len(what) <= 60 else what[:59] + "…"
    name = f" '{task.name}'" if task.name else ""
    return (
        f"{task.id}{name} {task.agent_type} · {task.status} · {task.mode} · "
        f"{task.turns} turns, {task.tool_calls} tool calls · {age}s ago — {what}"
    )


def register_task_commands(commands: CommandRouter, registry: TaskRegistry) -> None:
    """Register ``/tasks`` (list this session's subagents; ``/tasks cancel ID``)."""

    async def tasks(message: InboundMessage, args: str) -> str:
        words = args.split()
        if words and words[0] == "cancel":
            if len(words) != 2:
                raise CommandError("usage: /tasks cancel ID")
            try:
                task = await registry.owned(message.session_key, words[1])
                cancelled = await registry.cancel(task.id, reason="cancelled by the user")
            except TaskRefused as exc:
                raise CommandError(str(exc)) from None
            if not cancelled:
                return f"{task.id} had already finished ({task.status})."
            return "Cancelled " + ", ".join(t.id for t in cancelled) + "."
        if words:
            raise CommandError("usage: /tasks or /tasks cancel ID")
        found = await registry.repo.list(owner_key=message.session_key, limit=20)
        if not found:
            return "No subagents in this session."
        now = time.time()
        return "Subagents of this session:\n" + "\n".join(
            f"  {describe_task(t, now=now)}" for t in found
        )

    commands.register(
        "tasks",
        tasks,
        usage="/tasks [cancel ID]",
        summary="this session's subagents (or cancel one and its children)",
    )
