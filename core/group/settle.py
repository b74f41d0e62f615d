"""Settler: ends the caller's record of a peer task from its ``group_tasks`` row.

A row that ended (``done``, ``failed``, ``refused``) ends the record (completed or
failed) with its ``subagent.completed`` / ``subagent.failed`` event; a background task
is handed to the caller's session first (deduplicated by the task id, so a crash in
between hands it over once). A row still open whose lease ran out is ended as failed
here: its peer stopped answering. A record cancelled by the caller ends its open row.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from core.bus.sql import SqlBus
from core.events import EventLog
from core.store.engine import Store
from core.tasks.outside import OutsideTaskEnd
from core.tasks.records import PEER_PREFIX, TaskRecord
from core.tasks.repository import TaskRepository
from core.tools.subagents_config import SubagentsConfig

from .peer_tasks import clip_answer
from .task_rows import ACTIVE_STATES, GroupTask, GroupTasks

__all__ = ["Settler"]

log = logging.getLogger(__name__)


class Settler:
    """Ends peer task records (idempotent: every process of the caller may run it)."""

    def __init__(
        self,
        *,
        store: Store,
        bus: SqlBus,
        events: EventLog,
        tasks: GroupTasks,
        subagents: SubagentsConfig,
        clock: Callable[[], float],
    ) -> None:
        self._store = store
        self.events = events
        self._tasks = tasks
        self._end = OutsideTaskEnd(
            store=store,
            bus=bus,
            events=events,
            result_max_chars=subagents.result_max_chars,
            clock=clock,
        )
        self.repo = TaskRepository(store=store)

    async def check(self, record: TaskRecord) -> tuple[str, str] | None:
        """How the task ended (status, text), settling the record; None while it runs."""
        current = await self.repo.get(record.id) or record
        row = await self._tasks.get(record.id)
        peer = record.agent_type.removeprefix(PEER_PREFIX)
        caller = row.caller if row is not None else ""
        if current.status == "cancelled":
            if row is not None and row.active:
                cancelled = {
                    "status": "failed",
                    "error": current.error or "cancelled by the caller",
                }
                await self._tasks.change(row, cancelled, when=ACTIVE_STATES, by=caller)
            return "cancelled", current.error or "cancelled"
        if not current.active:
            return current.status, current.result or current.error or ""
        if row is None:
            return await self._finish(current, "failed", "the task's group record is gone")
        if row.active:
            if not row.expired:
                return None
            why = (
                f"peer {peer!r} stopped answering: its lease on the task ran out "
                "(no sign of life for group.expire_after seconds)"
            )
            ended = {"status": "failed", "error": why}
            await self._tasks.change(row, ended, when=ACTIVE_STATES, by=caller, expired_only=True)
            row = await self._tasks.get(record.id)
            if row is None or row.active:
                return None  # renewed meanwhile: it lives
        return await self._finish(current, *_outcome(row, peer))

    async def hand_off_later(self, record: TaskRecord) -> bool:
        """A sync wait that timed out: its answer becomes a handoff (False: it ended)."""
        return await self._store.transact(
            lambda conn: TaskRepository.update_in(
                conn, record.id, {"handoff": True}, when={"status": "running"}
            )
        )

    async def _finish(self, record: TaskRecord, status: str, text: str) -> tuple[str, str]:
        if await self._end.end(record, status, text, handoff_id=f"{PEER_PREFIX}{record.id}"):
            log.info(
                "group task %s id=%s peer=%s owner=%s handoff=%s",
                status,
                record.id,
                record.agent_type.removeprefix(PEER_PREFIX),
                record.owner_key,
                record.handoff,
            )
        return status, text


def _outcome(row: GroupTask, peer: str) -> tuple[str, str]:
    """The row's status and text for the record (the text bounded: a peer is another
    program, whatever it wrote)."""
    if row.status == "done":
        return "completed", clip_answer(row.result or "")
    if row.status == "refused":
        return "refused", clip_answer(row.error or f"{peer} refused the task")
    return "failed", clip_answer(row.error or f"{peer} failed the task")
