"""The ``familiar_group.group_tasks`` table: tasks one member delegated to another.

Every member of a group sees it (it lives in the shared schema, beside the roster).
The caller writes a row ``queued`` in the same transaction as its own task record; the
peer takes it (``running``) or refuses it (``refused``) and writes the answer (``done``
or ``failed``). ``lease_until`` is the peer's liveness for the task: set when the row is
written, renewed by the peer while it works on it; a caller that finds it passed ends
the task as failed. Every change is followed by a NOTIFY on the group channel (sent at
commit) naming the member it is for.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from sqlalchemy import (
    Column,
    Connection,
    Float,
    Index,
    MetaData,
    String,
    Table,
    Text,
    select,
    text,
    update,
)
from sqlalchemy.schema import CreateIndex, CreateTable

from core.store.engine import Store

__all__ = [
    "ACTIVE_STATES",
    "GROUP_NOTIFY_CHANNEL",
    "GROUP_SCHEMA",
    "GroupTask",
    "GroupTaskState",
    "GroupTasks",
    "group_tasks",
]

GROUP_SCHEMA = "familiar_group"
GROUP_NOTIFY_CHANNEL = "familiar_group"
"""The LISTEN/NOTIFY channel every member listens on (payload: small JSON)."""

GroupTaskState = Literal["queued", "running", "done", "failed", "refused"]
ACTIVE_STATES: tuple[str, ...] = ("queued", "running")

_metadata = MetaData(schema=GROUP_SCHEMA)
group_tasks = Table(
    "group_tasks",
    _metadata,
    Column("id", String(32), primary_key=True),
    Column("caller", String(128), nullable=False),
    Column("peer", String(128), nullable=False),
    Column("prompt", Text, nullable=False),
    Column("description", Text, nullable=False),
    Column("mode", String(16), nullable=False),
    Column("status", String(16), nullable=False),
    Column("result", Text, nullable=True),
    Column("error", Text, nullable=True),
    Column("lease_until", Float, nullable=False),
    Column("created_at", Float, nullable=False),
    Column("updated_at", Float, nullable=False),
    Index("ix_group_tasks_peer", "peer", "status"),
    Index("ix_group_tasks_caller", "caller", "status"),
)


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupTask:
    """One delegated task as both sides read it."""

    id: str
    caller: str
    peer: str
    prompt: str
    description: str
    mode: str
    status: GroupTaskState
    result: str | None
    error: str | None
    lease_until: float
    created_at: float
    updated_at: float

    @classmethod
    def of(cls, row: Any) -> GroupTask:
        return cls(**{n: getattr(row, n) for n in cls.__dataclass_fields__})

    @property
    def active(self) -> bool:
        return self.status in ACTIVE_STATES


def notify_in(conn: Connection, kind: str, to: str, task_id: str) -> None:
    """Wake ``to`` at commit: ``{"kind", "to", "id"}`` on the group channel."""
    payload = json.dumps({"kind": kind, "to": to, "id": task_id})
    conn.execute(text("SELECT pg_notify(:channel, :payload)"), {
        "channel": GROUP_NOTIFY_CHANNEL,
        "payload": payload,
    })


def create_tables_in(conn: Connection) -> None:
    """Create the schema and ``group_tasks`` if missing (idempotent; members starting at
    once take turns on an advisory lock)."""
    conn.execute(text("SELECT pg_advisory_xact_lock(hashtext('familiar_group.tasks'))"))
    conn.execute(text(f"CREATE SCHEMA IF NOT EXISTS {GROUP_SCHEMA}"))
    conn.execute(CreateTable(group_tasks, if_not_exists=True))
    for index in sorted(group_tasks.indexes, key=lambda i: str(i.name)):
        conn.execute(CreateIndex(index, if_not_exists=True))


class GroupTasks:
    """Reads and writes ``group_tasks``. ``*_in`` methods run in a caller's transaction."""

    def __init__(self, *, store: Store, clock: Callable[[], float] = time.time) -> None:
        self._store = store
        self._clock = clock

    async def create_tables(self) -> None:
        await self._store.transact(create_tables_in)

    @staticmethod
    def insert_in(conn: Connection, values: dict[str, Any]) -> None:
        """Insert a queued task (a second insert of the same id is dropped) and wake
        its peer."""
        found = conn.execute(select(group_tasks.c.id).where(group_tasks.c.id == values["id"]))
        if found.first() is None:
            conn.execute(group_tasks.insert().values(values))
        notify_in(conn, "task", values["peer"], values["id"])

    async def get(self, task_id: str) -> GroupTask | None:
        found = await self.many([task_id])
        return found.get(task_id)

    async def many(self, task_ids: Sequence[str]) -> dict[str, GroupTask]:
        if not task_ids:
            return {}
        query = select(group_tasks).where(group_tasks.c.id.in_(list(task_ids)))
        async with self._store.read() as conn:
            rows = (await conn.execute(query)).all()
        return {row.id: GroupTask.of(row) for row in rows}

    async def queued_for(self, peer: str, *, limit: int = 50) -> list[GroupTask]:
        query = (
            select(group_tasks)
            .where(group_tasks.c.peer == peer, group_tasks.c.status == "queued")
            .order_by(group_tasks.c.created_at)
            .limit(limit)
        )
        async with self._store.read() as conn:
            rows = (await conn.execute(query)).all()
        return [GroupTask.of(row) for row in rows]

    async def change(
        self,
        task: GroupTask,
        values: dict[str, Any],
        *,
        when: Sequence[str],
        wake: str,
        expired_only: bool = False,
    ) -> bool:
        """Change a task still in one of the states ``when`` and wake ``wake`` (a member's
        name); True if this call changed it. ``expired_only``: only while its lease has
        run out (a caller giving up on a silent peer)."""
        now = self._clock()
        query = update(group_tasks).where(
            group_tasks.c.id == task.id, group_tasks.c.status.in_(list(when))
        )
        if expired_only:
            query = query.where(group_tasks.c.lease_until < now)

        def job(conn: Connection) -> bool:
            done = conn.execute(query.values({**values, "updated_at": now}))
            if not done.rowcount:
                return False
            notify_in(conn, "task", wake, task.id)
            return True

        return await self._store.transact(job)

    async def renew(self, peer: str, lease: float) -> int:
        """Extend the lease of every task ``peer`` works on; how many there are."""
        until = self._clock() + lease

        def job(conn: Connection) -> int:
            done = conn.execute(
                update(group_tasks)
                .where(group_tasks.c.peer == peer, group_tasks.c.status == "running")
                .values(lease_until=until)
            )
            return int(done.rowcount or 0)

        return await self._store.write_one(job)
