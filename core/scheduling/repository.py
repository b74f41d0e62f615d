"""Schedule rows: create, list, get, advance, cancel (every SQL statement of scheduling)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Table, func, insert, select, update

from core.errors import CommandError
from core.event_data import EventType, ScheduleCancelled, ScheduleCreated
from core.events import Event, EventLog
from core.scheduling.records import (
    ScheduleInfo,
    ScheduleSpec,
    ScheduleTarget,
    info_of_row,
    schedule_fields,
)
from core.store.engine import Store
from core.store.models import EventRow, ScheduleRow

__all__ = ["Fired", "ScheduleRepository"]

_schedules: Table = ScheduleRow.__table__  # type: ignore[attr-defined]
_events: Table = EventRow.__table__  # type: ignore[attr-defined]
_ACTIVE = _schedules.c.status == "active"


@dataclass(frozen=True, slots=True)
class Fired:
    """What a firing records on its row: when, its firing id, and the message it publishes."""

    at: datetime
    firing_id: str
    message_id: str


class ScheduleRepository:
    """The ``schedules`` table: reads on the store's read path, writes as transaction jobs.

    Each write that users can see appends its event (``session.schedule_*``) in the same
    transaction, so the row and the event log never disagree.
    """

    def __init__(self, *, store: Store) -> None:
        self._store = store

    async def get(self, schedule_id: int) -> ScheduleInfo | None:
        """One schedule in any status, or None."""
        rows = await self._store.fetch(select(_schedules).where(_schedules.c.id == schedule_id))
        return info_of_row(rows[0]) if rows else None

    async def next_runs(self) -> list[tuple[int, float | None]]:
        """``(id, next_run_at)`` of every active schedule, oldest first (what the timer arms)."""
        query = select(_schedules.c.id, _schedules.c.next_run_at).where(_ACTIVE)
        rows = await self._store.fetch(query.order_by(_schedules.c.id))
        return [(int(r["id"]), r["next_run_at"]) for r in rows]

    async def fired_since(self, since: float) -> list[ScheduleInfo]:
        """Active or done schedules that fired at or after the timestamp ``since``."""
        query = select(_schedules).where(
            _schedules.c.last_run_at >= since,
            _schedules.c.running_message_id.is_not(None),
            _schedules.c.status.in_(("active", "done")),
        )
        return [info_of_row(r) for r in await self._store.fetch(query)]

    async def list(self, session_key: str | None = None) -> list[ScheduleInfo]:
        """Active schedules, oldest first; only ``session_key``'s when given."""
        query = select(_schedules).where(_ACTIVE)
        if session_key is not None:
            query = query.where(_schedules.c.session_key == session_key)
        return [info_of_row(r) for r in await self._store.fetch(query.order_by(_schedules.c.id))]

    async def create(
        self,
        target: ScheduleTarget,
        spec: ScheduleSpec,
        *,
        now: datetime,
        anchor: datetime,
        first_run: datetime | None,
        message_id: str | None,
        max_active: int | None = None,
    ) -> ScheduleInfo:
        """Insert a schedule and its ``schedule_created`` event, once per asking message.

        A ``message_id`` that already created this very spec (redelivered after a crash)
        gets that schedule back instead of a second one.

        Raises:
            CommandError: the session already has ``max_active`` active schedules.
        """
        values: dict[str, Any] = {
            "session_key": target.session_key,
            "channel": target.delivery.channel,
            "delivery": target.delivery.model_dump_json(),
            "kind": spec.kind,
            "spec": spec.spec,
            "timezone": spec.timezone,
            "prompt": spec.prompt,
            "created_at": now.timestamp(),
            "anchor": anchor.timestamp(),
            "next_run_at": None if first_run is None else first_run.timestamp(),
            "last_run_at": None,
            "run_count": 0,
            "status": "active" if first_run is not None else "done",
            "last_firing_id": None,
            "running_message_id": None,
        }

        def job(conn: Connection) -> ScheduleInfo:
            earlier = _created_by(conn, target.session_key, message_id, spec)
            if earlier is not None:
                return earlier
            if max_active is not None:
                active = conn.execute(
                    select(func.count())
                    .select_from(_schedules)
                    .where(
                        _schedules.c.session_key == target.session_key,
                        _schedules.c.status == "active",
                    )
                ).scalar_one()
                if active >= max_active:
                    raise CommandError(
                        f"this conversation already has {active} active schedules, the most "
                        f"allowed (scheduler.max_per_session = {max_active}); cancel some first"
                    )
            inserted = conn.execute(insert(_schedules).values(**values)).inserted_primary_key
            if inserted is None:
                raise RuntimeError("the database returned no id for the new schedule")
            info = info_of_row({**values, "id": int(inserted[0])})
            data = ScheduleCreated(**schedule_fields(info))
            EventLog.add_in(
                conn, [Event(session_key=target.session_key, message_id=message_id, data=data)]
            )
            return info

        return await self._store.transact(job)

    async def cancel(
        self, schedule_id: int, session_key: str | None, *, message_id: str | None
    ) -> ScheduleInfo | None:
        """Cancel an active schedule (of ``session_key`` when given); None if there is none."""
        conditions = [_schedules.c.id == schedule_id, _ACTIVE]
        if session_key is not None:
            conditions.append(_schedules.c.session_key == session_key)
        statement = (
            update(_schedules)
            .where(*conditions)
            .values(status="cancelled")
            .returning(*_schedules.c)
        )

        def job(conn: Connection) -> ScheduleInfo | None:
            found = conn.execute(statement).mappings().first()
            if found is None:
                return None
            info = info_of_row(found)
            data = ScheduleCancelled(**schedule_fields(info))
            EventLog.add_in(
                conn, [Event(session_key=info.session_key, message_id=message_id, data=data)]
            )
            return info

        return await self._store.transact(job)

    async def advance(
        self,
        schedule_id: int,
        due: float,
        *,
        next_run: datetime | None,
        event: Event,
        fired: Fired | None = None,
    ) -> bool:
        """Move a schedule on from its run due at ``due`` (firing it, or skipping it).

        Returns:
            False when the row no longer waits for that run (cancelled, or moved on by
            another firing): then nothing is written.
        """
        values: dict[str, Any] = {
            "next_run_at": None if next_run is None else next_run.timestamp(),
            "status": "active" if next_run is not None else "done",
        }
        if fired is not None:
            values |= {
                "last_run_at": fired.at.timestamp(),
                "run_count": _schedules.c.run_count + 1,
                "last_firing_id": fired.firing_id,
                "running_message_id": fired.message_id,
            }
        statement = (
            update(_schedules)
            .where(_schedules.c.id == schedule_id, _ACTIVE, _schedules.c.next_run_at == due)
            .values(**values)
        )

        def job(conn: Connection) -> bool:
            if conn.execute(statement).rowcount != 1:
                return False
            EventLog.add_in(conn, [event])
            return True

        return await self._store.transact(job)

    async def finish(self, schedule_id: int) -> None:
        """Mark an active schedule done (it has no further run)."""
        statement = (
            update(_schedules).where(_schedules.c.id == schedule_id, _ACTIVE).values(status="done")
        )
        await self._store.transact(lambda conn: conn.execute(statement))


def _created_by(
    conn: Connection, session_key: str, message_id: str | None, spec: ScheduleSpec
) -> ScheduleInfo | None:
    """The schedule ``message_id`` already created with this very spec, if any."""
    if message_id is None:
        return None
    rows = conn.execute(
        select(_events.c.data).where(
            _events.c.session_key == session_key,
            _events.c.message_id == message_id,
            _events.c.type == EventType.SCHEDULE_CREATED,
        )
    ).all()
    for (data,) in rows:
        made = json.loads(data)
        if (made.get("kind"), made.get("spec"), made.get("prompt")) == (
            spec.kind,
            spec.spec,
            spec.prompt,
        ):
            row = conn.execute(
                select(_schedules).where(_schedules.c.id == made["schedule_id"])
            ).first()
            return None if row is None else info_of_row(row._mapping)
    return None
