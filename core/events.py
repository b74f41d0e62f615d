"""The append-only session event log: what happened, in order, per session."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, Row, func, insert, select

from core.event_data import EventPayload, EventType, fields_of, payload_of, type_of
from core.store.engine import Store
from core.store.models import EventRow
from core.store.prepared import Prepared

__all__ = ["Event", "EventLog", "EventPayload", "EventType"]

_events = EventRow.__table__  # type: ignore[attr-defined]
_INSERT_EVENTS = Prepared(insert(_events))


@dataclass(frozen=True, slots=True, kw_only=True)
class Event:
    """One entry of a session's event log: a typed payload and where it belongs."""

    session_key: str
    data: EventPayload
    message_id: str | None = None
    created_at: float = field(default_factory=time.time)
    id: int | None = None

    @property
    def type(self) -> str:
        return type_of(self.data)

    def as_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": self.type,
            "session": self.session_key,
            "message_id": self.message_id,
            "at": self.created_at,
            "data": fields_of(self.data),
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
        _INSERT_EVENTS.many(
            conn,
            [
                {
                    "session_key": e.session_key,
                    "type": e.type,
                    "message_id": e.message_id,
                    "data": json.dumps(fields_of(e.data), default=str),
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
        """The newest ``limit`` events of a session (of one message, if given), oldest first."""
        query = select(_events).where(_events.c.session_key == session_key)
        if message_id is not None:
            query = query.where(_events.c.message_id == message_id)
        query = query.order_by(_events.c.id.desc()).limit(limit)
        async with self._store.read() as conn:
            rows = (await conn.execute(query)).all()
        return [_event_of(r) for r in reversed(rows)]

    async def newest_id(self) -> int:
        """The newest event id over all sessions (0 when none)."""
        async with self._store.read() as conn:
            return int((await conn.execute(select(func.max(_events.c.id)))).scalar() or 0)

    async def tail(self, after_id: int, *, types: Sequence[str], limit: int) -> Sequence[Event]:
        """Events of ``types`` newer than ``after_id`` over all sessions, oldest first."""
        query = (
            select(_events)
            .where(_events.c.id > after_id, _events.c.type.in_(list(types)))
            .order_by(_events.c.id)
            .limit(limit)
        )
        async with self._store.read() as conn:
            rows = (await conn.execute(query)).all()
        return tuple(_event_of(r) for r in rows)


def _event_of(row: Row[Any]) -> Event:
    return Event(
        session_key=row.session_key,
        data=payload_of(row.type, json.loads(row.data)),
        message_id=row.message_id,
        created_at=row.created_at,
        id=row.id,
    )
