"""McpTaskStore: the ``mcp-task`` records (``subagent_tasks``) and their ``mcp_tasks`` rows."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, select, update

from core.events import Event, EventLog
from core.store.engine import Store
from core.tasks.records import MCP_TASK, TaskRecord, TaskRow
from core.tasks.repository import TaskRepository

from .rows import McpTaskRow

__all__ = ["McpTaskInfo", "McpTaskStore"]

_tasks = TaskRow.__table__  # type: ignore[attr-defined]
_rows = McpTaskRow.__table__  # type: ignore[attr-defined]
_INTENT_MAX = 256
_TERMINAL = ("completed", "failed", "cancelled")


@dataclass(frozen=True, slots=True, kw_only=True)
class McpTaskInfo:
    """An ``mcp-task`` record with its MCP side."""

    record: TaskRecord
    server: str
    tool: str
    remote_id: str
    remote_status: str
    status_message: str | None
    poll_ms: int | None
    progress_token: str
    root_key: str
    lease_owner: str | None
    lease_until: float


def _info(record: TaskRecord, row: Any) -> McpTaskInfo:
    return McpTaskInfo(
        record=record,
        server=row.server,
        tool=row.tool,
        remote_id=row.remote_id,
        remote_status=row.remote_status,
        status_message=row.status_message,
        poll_ms=row.poll_ms,
        progress_token=row.progress_token,
        root_key=row.root_key,
        lease_owner=row.lease_owner,
        lease_until=row.lease_until,
    )


class McpTaskStore:
    """Reads and writes the MCP tasks; methods run their own transactions."""

    def __init__(self, *, store: Store, events: EventLog, clock: Callable[[], float]) -> None:
        self._store = store
        self._events = events
        self._clock = clock
        self.repo = TaskRepository(store=store)

    async def create(
        self, values: dict[str, Any], row: dict[str, Any], events: list[Event]
    ) -> tuple[TaskRecord, bool]:
        """Insert the record and its row (unless a record of the same ``spawn_key``
        exists: a rerun of the same call); the record and whether it is new."""

        def job(conn: Connection) -> tuple[TaskRecord, bool]:
            key = values.get("spawn_key")
            if key is not None and (found := TaskRepository.by_spawn_key_in(conn, key)):
                return found, False
            TaskRepository.insert_in(conn, values)
            conn.execute(_rows.insert().values(row))
            self._events.add_in(conn, events)
            record = TaskRepository.get_in(conn, values["id"])
            assert record is not None
            return record, True

        return await self._store.transact(job)

    async def by_spawn_key(self, key: str) -> TaskRecord | None:
        async with self._store.read() as conn:
            row = (await conn.execute(select(_tasks).where(_tasks.c.spawn_key == key))).first()
        return None if row is None else TaskRecord.of(row)

    async def get(self, task_id: str) -> McpTaskInfo | None:
        return await self._one(_rows.c.id == task_id)

    async def by_remote(self, server: str, remote_id: str) -> McpTaskInfo | None:
        return await self._one((_rows.c.server == server) & (_rows.c.remote_id == remote_id))

    async def by_token(self, token: str) -> McpTaskInfo | None:
        return await self._one(_rows.c.progress_token == token)

    async def _one(self, where: Any) -> McpTaskInfo | None:
        query = select(_tasks, _rows).join(_rows, _rows.c.id == _tasks.c.id).where(where)
        async with self._store.read() as conn:
            row = (await conn.execute(query.limit(1))).first()
        if row is None:
            return None
        record = TaskRecord.of(row)
        return _info(record, row)

    async def claim(self, owner: str, *, lease: float) -> list[str]:
        """Take the tasks nobody polls (their lease ran out) that are running, or were
        cancelled here but not yet on their server (while no gateway ran); their ids."""
        now = self._clock()
        unsettled = (_tasks.c.status == "running") | (
            (_tasks.c.status == "cancelled") & _rows.c.remote_status.not_in(_TERMINAL)
        )

        def job(conn: Connection) -> list[str]:
            ids = conn.execute(
                select(_rows.c.id)
                .join(_tasks, _tasks.c.id == _rows.c.id)
                .where(_tasks.c.agent_type == MCP_TASK, unsettled, _rows.c.lease_until < now)
            ).scalars()
            taken = []
            for task_id in list(ids):
                done = conn.execute(
                    update(_rows)
                    .where(_rows.c.id == task_id, _rows.c.lease_until < now)
                    .values(lease_owner=owner, lease_until=now + lease)
                )
                if done.rowcount:
                    taken.append(task_id)
            return taken

        return await self._store.transact(job)

    async def renew(self, task_id: str, owner: str, *, lease: float) -> bool:
        """Extend this owner's lease on a task; False when another process took it."""
        until = self._clock() + lease

        def job(conn: Connection) -> bool:
            done = conn.execute(
                update(_rows)
                .where(_rows.c.id == task_id, _rows.c.lease_owner == owner)
                .values(lease_until=until)
            )
            return bool(done.rowcount)

        return await self._store.transact(job)

    async def release(self, owner: str, task_ids: list[str]) -> None:
        """Give up the leases (a stopping process): the next start takes them at once."""
        if not task_ids:
            return

        def job(conn: Connection) -> None:
            conn.execute(
                update(_rows)
                .where(_rows.c.id.in_(task_ids), _rows.c.lease_owner == owner)
                .values(lease_owner=None, lease_until=0.0)
            )

        await self._store.transact(job)

    async def note(
        self,
        task_id: str,
        *,
        remote_status: str | None = None,
        message: str | None = None,
        poll_ms: int | None = None,
    ) -> None:
        """Record the server's latest word on a task: its status and status message
        (the record's progress: ``last_intent``)."""
        now = self._clock()
        values: dict[str, Any] = {}
        if remote_status is not None:
            values["remote_status"] = remote_status
        if message is not None:
            values["status_message"] = message
        if poll_ms is not None:
            values["poll_ms"] = poll_ms

        def job(conn: Connection) -> None:
            if values:
                conn.execute(update(_rows).where(_rows.c.id == task_id).values(values))
            if message:
                TaskRepository.update_in(
                    conn,
                    task_id,
                    {"last_intent": message[:_INTENT_MAX], "updated_at": now},
                    when={"status": "running"},
                )

        await self._store.transact(job)
