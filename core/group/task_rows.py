"""The rows of ``familiar_group.group_tasks`` (`core.group.tables`): delegated tasks.

Every member of a group sees it (it lives in the shared schema, beside the roster).
The caller writes a row ``queued`` in the same transaction as its own task record; the
peer takes it (``running``) or refuses it (``refused``) and writes the answer (``done``
or ``failed``). ``lease_until`` is the peer's liveness for the task: set when the row is
written, renewed by the peer while it works on it; a caller that finds it passed ends
the task as failed. Every change is followed by a NOTIFY on the group channel (sent at
commit) naming the member it is for. Ended rows are deleted after ``retention_days``
(by their peer or their caller).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from sqlalchemy import (
    ColumnElement,
    Connection,
    Float,
    cast,
    delete,
    func,
    or_,
    select,
    text,
    update,
)

from core.group.tables import GROUP_NOTIFY_CHANNEL, group_tasks
from core.store.engine import Store

__all__ = ["ACTIVE_STATES", "GroupTask", "GroupTaskState", "GroupTasks", "db_now"]

GroupTaskState = Literal["queued", "running", "done", "failed", "refused"]
ACTIVE_STATES: tuple[str, ...] = ("queued", "running")


def db_now() -> ColumnElement[float]:
    """The database's clock in epoch seconds: every member's hosts compare leases by it."""
    return cast(func.extract("epoch", func.now()), Float)


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
    expired: bool = False
    """Its lease had run out when it was read (by the database's clock)."""

    @classmethod
    def of(cls, row: Any) -> GroupTask:
        return cls(**{n: getattr(row, n) for n in cls.__dataclass_fields__})

    @property
    def active(self) -> bool:
        return self.status in ACTIVE_STATES


TASK_NOTE = "group.task"
"""The kind of the group note that a task changed (``core.group.signals``)."""


def notify_in(conn: Connection, sender: str, to: str, task_id: str) -> None:
    """Wake ``to`` when the transaction commits (a `core.group.signals` note)."""
    payload = json.dumps({"kind": TASK_NOTE, "from": sender, "to": to, "id": task_id})
    conn.execute(
        text("SELECT pg_notify(:channel, :payload)"),
        {"channel": GROUP_NOTIFY_CHANNEL, "payload": payload},
    )


class GroupTasks:
    """Reads and writes ``group_tasks``. ``*_in`` methods run in a caller's transaction."""

    def __init__(self, *, store: Store, clock: Callable[[], float] = time.time) -> None:
        self._store = store
        self._clock = clock

    @staticmethod
    def insert_in(conn: Connection, values: dict[str, Any], *, lease: float) -> None:
        """Insert a queued task whose lease runs ``lease`` seconds, and wake its peer."""
        conn.execute(group_tasks.insert().values({**values, "lease_until": db_now() + lease}))
        notify_in(conn, values["caller"], values["peer"], values["id"])

    async def get(self, task_id: str) -> GroupTask | None:
        found = await self.many([task_id])
        return found.get(task_id)

    async def many(self, task_ids: Sequence[str]) -> dict[str, GroupTask]:
        if not task_ids:
            return {}
        query = select(group_tasks, _expired()).where(group_tasks.c.id.in_(list(task_ids)))
        async with self._store.read() as conn:
            rows = (await conn.execute(query)).all()
        return {row.id: GroupTask.of(row) for row in rows}

    async def queued_for(
        self, peer: str, *, skip_callers: Collection[str] = (), limit: int = 50
    ) -> list[GroupTask]:
        """The oldest tasks queued for ``peer``, but none of ``skip_callers``' (so the
        tasks of callers that may not start more now never hide the others')."""
        query = (
            select(group_tasks, _expired())
            .where(group_tasks.c.peer == peer, group_tasks.c.status == "queued")
            .order_by(group_tasks.c.created_at)
            .limit(limit)
        )
        if skip_callers:
            query = query.where(group_tasks.c.caller.not_in(list(skip_callers)))
        async with self._store.read() as conn:
            rows = (await conn.execute(query)).all()
        return [GroupTask.of(row) for row in rows]

    async def running_by_caller(self, peer: str) -> dict[str, int]:
        """How many tasks each caller has running on ``peer``."""
        query = (
            select(group_tasks.c.caller, func.count())
            .where(group_tasks.c.peer == peer, group_tasks.c.status == "running")
            .group_by(group_tasks.c.caller)
        )
        async with self._store.read() as conn:
            rows = (await conn.execute(query)).all()
        return {caller: count for caller, count in rows}

    async def change(
        self,
        task: GroupTask,
        values: dict[str, Any],
        *,
        when: Sequence[str],
        by: str,
        lease: float | None = None,
        expired_only: bool = False,
    ) -> bool:
        """Change a task still in one of the states ``when`` and wake the other side
        (``by`` is the member changing it); True if this call changed it. ``lease``:
        its lease runs that many seconds from now. ``expired_only``: only while its lease
        has run out (a caller giving up on a silent peer)."""
        query = update(group_tasks).where(
            group_tasks.c.id == task.id, group_tasks.c.status.in_(list(when))
        )
        if expired_only:
            query = query.where(group_tasks.c.lease_until < db_now())
        changes: dict[str, Any] = {**values, "updated_at": self._clock()}
        if lease is not None:
            changes["lease_until"] = db_now() + lease
        other = task.caller if by == task.peer else task.peer

        def job(conn: Connection) -> bool:
            done = conn.execute(query.values(changes))
            if not done.rowcount:
                return False
            notify_in(conn, by, other, task.id)
            return True

        return await self._store.transact(job)

    async def renew(self, peer: str, lease: float) -> int:
        """Extend the lease of every task ``peer`` works on; how many there are."""

        def job(conn: Connection) -> int:
            done = conn.execute(
                update(group_tasks)
                .where(group_tasks.c.peer == peer, group_tasks.c.status == "running")
                .values(lease_until=db_now() + lease)
            )
            return int(done.rowcount or 0)

        return await self._store.write_one(job)

    async def prune(self, member: str, days: float) -> int:
        """Delete the ended tasks sent to or by ``member`` older than ``days``; how many
        (a task sent to a peer that never comes back is deleted by its caller)."""
        cutoff = self._clock() - days * 86_400

        def job(conn: Connection) -> int:
            done = conn.execute(
                delete(group_tasks).where(
                    or_(group_tasks.c.peer == member, group_tasks.c.caller == member),
                    group_tasks.c.status.not_in(ACTIVE_STATES),
                    group_tasks.c.updated_at < cutoff,
                )
            )
            return int(done.rowcount or 0)

        return await self._store.write_one(job)


def _expired() -> ColumnElement[bool]:
    return (group_tasks.c.lease_until < db_now()).label("expired")
