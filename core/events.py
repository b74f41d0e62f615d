"""The append-only session event log: what happened, in order, per session."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from sqlalchemy import Connection, insert
from sqlmodel import col, select

from core.store.engine import Store
from core.store.models import EventRow

__all__ = ["Event", "EventLog", "EventType"]

_INSERT_EVENTS = insert(EventRow.__table__)  # type: ignore[attr-defined]


class EventType:
    """Public event type names (hooks, scripts and ``sessions show --events`` rely on them)."""

    USER_MESSAGE: Final = "user.message"
    TURN_START: Final = "assistant.turn_start"
    ASSISTANT_MESSAGE: Final = "assistant.message"
    TURN_END: Final = "assistant.turn_end"
    TOOL_START: Final = "tool.execution_start"
    TOOL_COMPLETE: Final = "tool.execution_complete"
    IDLE: Final = "session.idle"
    TASK_COMPLETE: Final = "session.task_complete"
    ERROR: Final = "session.error"
    SCHEDULE_CREATED: Final = "session.schedule_created"
    SCHEDULE_CANCELLED: Final = "session.schedule_cancelled"
    SCHEDULE_FIRED: Final = "session.schedule_fired"
    SCHEDULE_MISSED: Final = "session.schedule_missed"
    SUBAGENT_STARTED: Final = "subagent.started"
    SUBAGENT_COMPLETED: Final = "subagent.completed"
    SUBAGENT_FAILED: Final = "subagent.failed"
    HOOK_BLOCKED: Final = "hook.blocked"


@dataclass(frozen=True, slots=True)
class Event:
    """One entry of a session's event log."""

    session_key: str
    type: str
    message_id: str | None = None
    data: dict[str, Any] = field(default_factory=dict)
    created_at: float = field(default_factory=time.time)
    id: int | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": self.type,
            "session": self.session_key,
            "message_id": self.message_id,
            "at": self.created_at,
            "data": self.data,
        }


class EventLog:
    """Appends and reads events. Appends can join a caller's transaction."""

    def __init__(self, *, store: Store) -> None:
        self._store = store

    @staticmethod
    def add_in(conn: Connection, events: Sequence[Event]) -> None:
        """Insert ``events`` inside a caller's transaction job (one statement)."""
        if not events:
            return
        conn.execute(
            _INSERT_EVENTS,
            [
                {
                    "session_key": e.session_key,
                    "type": e.type,
                    "message_id": e.message_id,
                    "data": json.dumps(e.data, default=str),
                    "created_at": e.created_at,
                }
                for e in events
            ],
        )

    async def append(self, *events: Event) -> None:
        await self._store.transact(lambda conn: self.add_in(conn, events))

    async def list(
        self, session_key: str, *, message_id: str | None = None, limit: int = 10_000
    ) -> list[Event]:
        query = select(EventRow).where(col(EventRow.session_key) == session_key)
        if message_id is not None:
            query = query.where(col(EventRow.message_id) == message_id)
        query = query.order_by(col(EventRow.id)).limit(limit)
        async with self._store.read() as s:
            rows = (await s.exec(query)).all()
        return [
            Event(
                session_key=r.session_key,
                type=r.type,
                message_id=r.message_id,
                data=json.loads(r.data),
                created_at=r.created_at,
                id=r.id,
            )
            for r in rows
        ]
