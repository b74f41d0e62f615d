"""TaskRepository: reads and writes the ``subagent_tasks`` rows (no policy, no bus)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, func, insert, or_, select, text, update

from core.store.engine import Store
from core.store.models import EventRow
from core.tasks.records import ACTIVE, MCP_TASK, PEER_PREFIX, TaskRecord, TaskRow

__all__ = ["TaskRepository"]

_tasks = TaskRow.__table__  # type: ignore[attr-defined]
_events = EventRow.__table__  # type: ignore[attr-defined]


class TaskRepository:
    """The task rows. Methods ending in ``_in`` run inside a caller's transaction job."""

    def __init__(self, *, store: Store) -> None:
        self._store = store

    # -- inside a transaction job ----------------------------------------------------------

    @staticmethod
    def insert_in(conn: Connection, values: dict[str, Any]) -> None:
        conn.execute(insert(_tasks).values(values))

    @staticmethod
    def get_in(conn: Connection, task_id: str) -> TaskRecord | None:
        row = conn.execute(select(_tasks).where(_tasks.c.id == task_id)).first()
        return None if row is None else TaskRecord.of(row)

    @staticmethod
    def by_spawn_key_in(conn: Connection, spawn_key: str) -> TaskRecord | None:
        row = conn.execute(select(_tasks).where(_tasks.c.spawn_key == spawn_key)).first()
        return None if row is None else TaskRecord.of(row)

    @staticmethod
    def running_in(conn: Connection) -> int:
        """Running agents (not MCP tasks nor peers' tasks: others work on those), counted under
        a lock held to the end of the transaction (on PostgreSQL an advisory lock;
        SQLite has one writer anyway), so two spawns checking the cap at once cannot
        both pass it. The lock is the schema's: assistants sharing a database with their
        own ``store.schema`` do not wait for each other."""
        if conn.dialect.name == "postgresql":
            key = "hashtext('familiar.subagents:' || current_schema())"
            conn.execute(text(f"SELECT pg_advisory_xact_lock({key})"))
        query = (
            select(func.count())
            .select_from(_tasks)
            .where(
                _tasks.c.status == "running",
                _tasks.c.agent_type != MCP_TASK,
                _tasks.c.agent_type.not_like(f"{PEER_PREFIX}%"),
            )
        )
        return int(conn.execute(query).scalar() or 0)

    @staticmethod
    def active_children_in(conn: Connection, owner_key: str) -> list[TaskRecord]:
        rows = conn.execute(
            select(_tasks).where(_tasks.c.owner_key == owner_key, _tasks.c.status.in_(ACTIVE))
        ).all()
        return [TaskRecord.of(r) for r in rows]

    @staticmethod
    def update_in(
        conn: Connection,
        task_id: str,
        values: dict[str, Any],
        *,
        when: dict[str, Any] | None = None,
    ) -> bool:
        """Update one row (only if its columns equal ``when``); True if it changed."""
        query = update(_tasks).where(_tasks.c.id == task_id)
        for column, value in (when or {}).items():
            query = query.where(_tasks.c[column] == value)
        return bool(conn.execute(query.values(values)).rowcount)

    # -- standalone ------------------------------------------------------------------------

    async def get(self, task_id: str) -> TaskRecord | None:
        return await self._one(_tasks.c.id == task_id)

    async def by_child_key(self, child_key: str) -> TaskRecord | None:
        return await self._one(_tasks.c.child_key == child_key)

    async def find(self, ref: str, *, owner_key: str | None = None) -> TaskRecord | None:
        """A task by id, or by name among ``owner_key``'s (the newest of that name)."""
        query = select(_tasks).where(or_(_tasks.c.id == ref, _tasks.c.name == ref))
        if owner_key is not None:
            query = query.where(_tasks.c.owner_key == owner_key)
        query = query.order_by((_tasks.c.id == ref).desc(), _tasks.c.created_at.desc())
        async with self._store.read() as conn:
            row = (await conn.execute(query.limit(1))).first()
        return None if row is None else TaskRecord.of(row)

    async def list(
        self,
        *,
        owner_key: str | None = None,
        owner_keys: Sequence[str] = (),
        statuses: Sequence[str] = (),
        limit: int = 200,
    ) -> list[TaskRecord]:
        """The newest tasks first (of one owner or of some owners, in some statuses, if given)."""
        query = select(_tasks).order_by(_tasks.c.created_at.desc(), _tasks.c.id)
        if owner_key is not None:
            query = query.where(_tasks.c.owner_key == owner_key)
        if owner_keys:
            query = query.where(_tasks.c.owner_key.in_(list(owner_keys)))
        if statuses:
            query = query.where(_tasks.c.status.in_(list(statuses)))
        async with self._store.read() as conn:
            rows = (await conn.execute(query.limit(limit))).all()
        return [TaskRecord.of(r) for r in rows]

    async def tool_progress(self, child_key: str, message_id: str) -> tuple[int, str | None]:
        """Tool calls made while answering ``message_id``, and the last tool's name."""
        where = (_events.c.session_key == child_key, _events.c.message_id == message_id)
        count = (
            select(func.count())
            .select_from(_events)
            .where(*where, _events.c.type == "tool.execution_complete")
        )
        last = (
            select(_events.c.data)
            .where(*where, _events.c.type == "tool.execution_start")
            .order_by(_events.c.id.desc())
            .limit(1)
        )
        async with self._store.read() as conn:
            calls = int((await conn.execute(count)).scalar() or 0)
            data = (await conn.execute(last)).scalar()
        return calls, _tool_of(data)

    async def _one(self, where: Any) -> TaskRecord | None:
        async with self._store.read() as conn:
            row = (await conn.execute(select(_tasks).where(where).limit(1))).first()
        return None if row is None else TaskRecord.of(row)


def _tool_of(data: str | None) -> str | None:
    if not data:
        return None
    try:
        found = json.loads(data).get("tool")
    except (ValueError, AttributeError):
        return None
    return str(found)[:256] if found else None
