"""A session's standing modes: autopilot (``/autopilot``), and its last consolidation."""

from __future__ import annotations

import time
from collections.abc import Callable

from sqlalchemy import Connection, bindparam, insert, or_, select, update
from sqlalchemy.exc import IntegrityError

from core.event_data import ModeChanged
from core.events import Event, EventLog
from core.orchestration.models import SessionModeRow
from core.store.engine import Store

__all__ = ["SessionModes"]

_table = SessionModeRow.__table__  # type: ignore[attr-defined]
_AUTOPILOT = select(_table.c.autopilot).where(_table.c.session_key == bindparam("key"))


class SessionModes:
    """Reads and writes the ``session_modes`` rows (a session without one has no mode)."""

    def __init__(
        self, *, store: Store, events: EventLog, clock: Callable[[], float] = time.time
    ) -> None:
        self._store = store
        self._events = events
        self._clock = clock

    async def autopilot(self, session_key: str) -> bool:
        """Whether every message of the session runs in autopilot."""
        async with self._store.read() as conn:
            return bool((await conn.execute(_AUTOPILOT, {"key": session_key})).scalar())

    @staticmethod
    def autopilot_in(conn: Connection, session_key: str) -> bool:
        """`autopilot` inside a caller's transaction job (the turn's first one)."""
        return bool(conn.execute(_AUTOPILOT, {"key": session_key}).scalar())

    async def set_autopilot(
        self, session_key: str, enabled: bool, *, message_id: str | None = None
    ) -> bool:
        """Turn autopilot on or off; returns whether it changed (an event records it)."""
        now = self._clock()

        def job(conn: Connection) -> bool:
            row = conn.execute(select(_table).where(_table.c.session_key == session_key)).first()
            if row is not None and bool(row.autopilot) == enabled:
                return False
            if row is None:
                conn.execute(
                    insert(_table).values(
                        session_key=session_key, autopilot=enabled, updated_at=now
                    )
                )
            else:
                conn.execute(
                    update(_table)
                    .where(_table.c.session_key == session_key)
                    .values(autopilot=enabled, updated_at=now)
                )
            data = ModeChanged(mode="autopilot", enabled=enabled)
            self._events.add_in(
                conn, [Event(session_key=session_key, message_id=message_id, data=data)]
            )
            return True

        return await self._store.transact(job)

    async def consolidated_at(self, session_key: str) -> float | None:
        query = select(_table.c.consolidated_at).where(_table.c.session_key == session_key)
        async with self._store.read() as conn:
            found = (await conn.execute(query)).scalar()
        return None if found is None else float(found)

    async def claim_consolidation(self, session_key: str, *, period: float) -> bool:
        """Record a consolidation now unless one was recorded less than ``period`` ago.

        A compare-and-set on the row: of several processes asking at once, one wins.
        """
        now = self._clock()

        def job(conn: Connection) -> bool:
            changed = conn.execute(
                update(_table)
                .where(
                    _table.c.session_key == session_key,
                    or_(
                        _table.c.consolidated_at.is_(None),
                        _table.c.consolidated_at <= now - period,
                    ),
                )
                .values(consolidated_at=now, updated_at=now)
            ).rowcount
            if changed:
                return True
            exists = conn.execute(
                select(_table.c.session_key).where(_table.c.session_key == session_key)
            ).first()
            if exists is not None:
                return False
            conn.execute(
                insert(_table).values(
                    session_key=session_key, autopilot=False, consolidated_at=now, updated_at=now
                )
            )
            return True

        try:
            return await self._store.transact(job)
        except IntegrityError:  # another process inserted the row first: it won
            return False
