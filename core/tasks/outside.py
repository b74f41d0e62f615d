"""Ending work that runs outside this assistant's agents (an MCP task, a group peer's
task): its outcome handed to the owner's session when it was to come as a handoff, then
the record ended, with its ``subagent.completed`` / ``subagent.failed`` event, once."""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import Connection

from core.bus.sql import SqlBus
from core.event_data import EventPayload, SubagentCompleted, SubagentFailed
from core.events import Event, EventLog
from core.store.engine import Store
from core.tasks.handoff import handoff_message
from core.tasks.records import TaskRecord
from core.tasks.repository import TaskRepository

__all__ = ["OutsideTaskEnd"]

_PREVIEW = 500
"""Characters of the outcome in the event (the record keeps it whole)."""


class OutsideTaskEnd:
    """Ends the records of outside work (idempotent: every process may try).

    Args:
        store: the open store.
        bus: where handoffs are published.
        events: the session event log.
        result_max_chars: characters of an outcome in a handoff
            (``tools.subagents.result_max_chars``).
        clock: unix "now".
    """

    def __init__(
        self,
        *,
        store: Store,
        bus: SqlBus,
        events: EventLog,
        result_max_chars: int,
        clock: Callable[[], float],
    ) -> None:
        self._store = store
        self._bus = bus
        self._events = events
        self._result_max = result_max_chars
        self._clock = clock

    async def end(self, record: TaskRecord, status: str, text: str, *, handoff_id: str) -> bool:
        """End the running ``record`` with ``status`` (``completed``; ``cancelled``; any
        other outcome, such as ``failed`` or ``refused``, ends it failed) and ``text``;
        False when it had ended already.

        The handoff (inbound id ``handoff_id``) is published before the record changes:
        a crash in between publishes it again, and the bus drops the repeat.
        """
        if record.handoff:
            await self._bus.publish_inbound(
                handoff_message(
                    record,
                    inbound_id=handoff_id,
                    status=status,
                    result=text,
                    limit=self._result_max,
                )
            )
        now = self._clock()
        ok = status == "completed"
        values = {
            "status": status if status in ("completed", "cancelled") else "failed",
            "result": text if ok else None,
            "error": None if ok else text,
            "turns": record.turns + 1,
            "updated_at": now,
            "finished_at": now,
        }
        data: EventPayload
        if ok:
            data = SubagentCompleted(
                agent_id=record.id,
                agent_type=record.agent_type,
                status=status,
                result=text[:_PREVIEW],
            )
        else:
            data = SubagentFailed(
                agent_id=record.id,
                agent_type=record.agent_type,
                status=status,
                error=text[:_PREVIEW],
            )

        def job(conn: Connection) -> bool:
            if not TaskRepository.update_in(conn, record.id, values, when={"status": "running"}):
                return False
            self._events.add_in(conn, [Event(session_key=record.owner_key, data=data)])
            return True

        return await self._store.transact(job)
