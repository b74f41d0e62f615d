"""Waiting for a message's own background agents before its autopilot run ends.

A message in autopilot (``/autopilot on``, ``--autopilot``, ``/fleet``) does not end
while background agents it started still run: the run waits (its concurrency slot
given back) until at least one is done, then tells the model what finished, and for
a session with todos, the board and which todos are ready now. The results it waits
for are taken into the run itself, so they do not come back again as handoffs.
"""

from __future__ import annotations

import asyncio
import logging

from sqlalchemy import Connection

from core.orchestration.todos import TodoStore, ready_todos
from core.store.engine import Store
from core.tasks.handoff import clip
from core.tasks.records import TaskRecord
from core.tasks.registry import TaskRegistry, WaitOutcome
from core.tools.base import ToolContext

__all__ = ["BackgroundWaiter"]

log = logging.getLogger(__name__)

_MAX_WAITED = 50


class BackgroundWaiter:
    """The `core.agent.services.BackgroundWork` of the runtime."""

    def __init__(self, *, store: Store, registry: TaskRegistry, todos: TodoStore) -> None:
        self._store = store
        self._registry = registry
        self._todos = todos

    async def started(self, ctx: ToolContext, *, running: bool = True) -> list[TaskRecord]:
        """The background agents the message of ``ctx`` started (those still running)."""
        if not ctx.message_id:
            return []
        prefix = f"{ctx.message_id}:"
        found = await self._registry.repo.list(
            owner_key=ctx.session_key, statuses=("running",) if running else (), limit=500
        )
        return [
            t for t in found if t.mode == "background" and (t.spawn_key or "").startswith(prefix)
        ][:_MAX_WAITED]

    async def settle(self, ctx: ToolContext) -> str | None:
        running = await self.started(ctx)
        if not running:
            # Its agents may have finished before it asked (e.g. after a restart): todos
            # they unblocked are still the run's to start.
            return await self._unblocked(ctx)
        await self._store.transact(lambda conn: self._keep_results(conn, running))
        waits = [
            asyncio.ensure_future(self._registry.wait(t, capacity=ctx.capacity)) for t in running
        ]
        try:
            done, _ = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waits:
                if not w.done():
                    w.cancel()
            await asyncio.gather(*waits, return_exceptions=True)
        outcomes = [w.result() for w in done if not w.cancelled() and w.exception() is None]
        log.info(
            "autopilot waited for background agents finished=%d running=%d",
            sum(not o.timed_out for o in outcomes),
            len(running),
        )
        return await self._report(ctx, outcomes)

    async def _unblocked(self, ctx: ToolContext) -> str | None:
        """A report when todos became ready through agents this message started."""
        todos = await self._todos.list(ctx.session_key)
        if not todos:
            return None
        own = {t.id for t in await self.started(ctx, running=False)}
        by_id = {t.id: t for t in todos}
        ready = [
            t
            for t in ready_todos(todos)
            if any(by_id[d].agent_id in own for d in t.depends_on if d in by_id)
        ]
        if not ready:
            return None
        return await self._report(ctx, [])

    def _keep_results(self, conn: Connection, tasks: list[TaskRecord]) -> None:
        for task in tasks:
            self._registry.repo.update_in(
                conn,
                task.id,
                {"handoff": False},
                when={"message_id": task.message_id, "status": "running"},
            )

    async def _report(self, ctx: ToolContext, outcomes: list[WaitOutcome]) -> str:
        limit = self._registry.config.result_max_chars
        lines = ["Background agents you started reported back:"] if outcomes else []
        for outcome in outcomes:
            task = outcome.task
            what = f" ({task.description})" if task.description else ""
            if outcome.timed_out:
                lines.append(f"- {task.id} {task.agent_type}{what}: still running")
                continue
            result = clip(outcome.result or "", limit)
            lines.append(f"- {task.id} {task.agent_type}{what}: {outcome.status}\n{result}")
        still = await self.started(ctx)
        if still:
            lines.append(f"Still running: {', '.join(t.id for t in still)}.")
        todos = await self._todos.list(ctx.session_key)
        if todos:
            lines.append("Todos: " + "; ".join(f"{t.id} {t.status}" for t in todos) + ".")
            ready = ready_todos(todos)
            if ready:
                lines.append(
                    "Ready to start now (todo action=start): "
                    + ", ".join(t.id for t in ready)
                    + "."
                )
        lines.append("Continue with the task; call task_complete when it is completely done.")
        return "\n".join(lines)
