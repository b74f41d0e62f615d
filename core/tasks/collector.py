"""The children's answers: recorded, and handed to the parent when it asked for that.

The registry is the ``subagent`` channel's delivery: child replies land in the outbox
like any final reply, and this takes them, records result and progress, publishes the
background handoff (deduplicated by the child message it answers) *before* changing
the row, and only then marks the reply delivered. A crash anywhere in between repeats
the pass, and the parent still gets exactly one handoff.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

from sqlalchemy import Connection

from core.bus.sql import SqlBus
from core.event_data import EventPayload, SubagentCompleted, SubagentFailed
from core.events import Event, EventLog
from core.messages import OutboundMessage
from core.store.engine import Store
from core.tasks.handoff import handoff_message
from core.tasks.profiles import SubagentLifecycle
from core.tasks.records import TaskRecord
from core.tasks.repository import TaskRepository
from core.tools.subagents_config import SubagentsConfig

__all__ = ["SUBAGENT_CHANNEL", "AnswerCollector", "status_of"]

log = logging.getLogger(__name__)

SUBAGENT_CHANNEL = "subagent"
_PREVIEW = 500


def status_of(task: TaskRecord, reply: OutboundMessage) -> str:
    if reply.kind == "error":
        return "failed"
    return "idle" if task.multi_turn else "completed"


class AnswerCollector:
    """Takes the ``subagent`` channel's replies off the outbox, one pass at a time."""

    def __init__(
        self,
        *,
        store: Store,
        bus: SqlBus,
        events: EventLog,
        repo: TaskRepository,
        config: SubagentsConfig,
        clock: Callable[[], float],
    ) -> None:
        self._store = store
        self._bus = bus
        self._events = events
        self.repo = repo
        self.config = config
        self._clock = clock
        self._stop_listeners: list[SubagentLifecycle] = []
        self._worker: asyncio.Task[None] | None = None

    async def start(self) -> None:
        if self._worker is None:
            self._worker = asyncio.create_task(self._collect(), name="familiar-subagents")

    async def stop(self) -> None:
        worker, self._worker = self._worker, None
        if worker is not None:
            worker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await worker

    async def _collect(self) -> None:
        while True:
            try:
                for due in await self._bus.due_outbound(SUBAGENT_CHANNEL, limit=100):
                    await self.settle(due.message)
                    await self._bus.mark_delivered(due.message.id)
            except Exception:
                log.exception("collecting subagent answers failed; retrying")
                await asyncio.sleep(1.0)
            await self._bus.wait_outbound(SUBAGENT_CHANNEL, 1.0)

    def add_stop_listener(self, listener: SubagentLifecycle) -> None:
        """Tell ``listener`` each child's answer once, after it is recorded (the
        ``subagentStop`` hook; a crash right after the record skips it)."""
        self._stop_listeners.append(listener)

    async def settle(self, reply: OutboundMessage) -> None:
        """Record a child's answer; hand it to the parent when asked to (idempotent)."""
        task = await self.repo.by_child_key(reply.session_key)
        if task is None or reply.inbound_id != task.message_id or task.status == "cancelled":
            return  # an earlier message, a /stop, or a cancelled agent's last words
        status = status_of(task, reply)
        if task.handoff:
            # Before the row changes: a crash in between repeats this, and the bus
            # drops the repeat (same event id).
            await self._bus.publish_inbound(
                handoff_message(
                    task,
                    inbound_id=reply.inbound_id,
                    status=status,
                    result=reply.text,
                    limit=self.config.result_max_chars,
                )
            )
        if task.status != "running":
            return  # recorded by an earlier pass
        calls, last_tool = await self.repo.tool_progress(task.child_key, reply.inbound_id)
        now = self._clock()
        values: dict[str, Any] = {
            "status": status,
            "result": reply.text,
            "error": reply.text if status == "failed" else None,
            "turns": task.turns + 1,
            "tool_calls": task.tool_calls + calls,
            "last_intent": last_tool or task.last_intent,
            "updated_at": now,
            "finished_at": now,
        }
        data: EventPayload
        if status == "failed":
            data = SubagentFailed(
                agent_id=task.id,
                agent_type=task.agent_type,
                status=status,
                error=reply.text[:_PREVIEW],
            )
        else:
            data = SubagentCompleted(
                agent_id=task.id,
                agent_type=task.agent_type,
                status=status,
                result=reply.text[:_PREVIEW],
            )

        def job(conn: Connection) -> bool:
            when = {"status": "running", "message_id": reply.inbound_id}
            if not self.repo.update_in(conn, task.id, values, when=when):
                return False  # another pass recorded it
            if task.memory_mode != "isolated":
                self._events.add_in(conn, [Event(session_key=task.owner_key, data=data)])
            return True

        if not await self._store.transact(job):
            return
        for listener in self._stop_listeners:  # once: after the pass that recorded it
            await listener.stopped(task, reply.text)
        log.info("subagent %s agent_id=%s owner=%s", status, task.id, task.owner_key)
