"""Todos of a session's plan (``/fleet``): stored per session, with dependencies.

A todo started as a subagent takes its status from the agent's record: when that
agent has answered (or failed, or was cancelled) the todo becomes ``done`` (or
``failed``) at the next read, which writes the change and a ``todo.updated`` event.
"""

from __future__ import annotations

import builtins
import json
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from sqlalchemy import Connection, func, insert, select, update

from core.errors import ToolRetry
from core.event_data import TodoUpdated
from core.events import Event, EventLog
from core.orchestration.models import TodoRow
from core.store.engine import Store
from core.tasks.records import TaskRecord
from core.tasks.repository import TaskRepository

__all__ = ["TODO_STATUSES", "Todo", "TodoStatus", "TodoStore", "ready_todos"]

TodoStatus = Literal["pending", "in_progress", "done", "failed", "cancelled"]
TODO_STATUSES: tuple[str, ...] = ("pending", "in_progress", "done", "failed", "cancelled")
FINISHED: tuple[str, ...] = ("done", "failed", "cancelled")
_ID = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
_MAX_TODOS = 200
_table = TodoRow.__table__  # type: ignore[attr-defined]


@dataclass(frozen=True, slots=True, kw_only=True)
class Todo:
    """One todo as the tool, the CLI and the fleet see it."""

    session_key: str
    id: str
    seq: int
    title: str
    prompt: str
    agent_type: str
    depends_on: tuple[str, ...]
    status: str
    agent_id: str | None
    result: str | None
    created_at: float
    updated_at: float

    @classmethod
    def of(cls, row: Any) -> Todo:
        return cls(
            session_key=row.session_key,
            id=row.id,
            seq=int(row.seq),
            title=row.title,
            prompt=row.prompt,
            agent_type=row.agent_type,
            depends_on=tuple(json.loads(row.depends_on or "[]")),
            status=row.status,
            agent_id=row.agent_id,
            result=row.result,
            created_at=float(row.created_at),
            updated_at=float(row.updated_at),
        )

    def as_json(self, *, result_chars: int | None = None) -> dict[str, Any]:
        result = self.result
        if result is not None and result_chars is not None and len(result) > result_chars:
            result = result[:result_chars] + "…"
        return {
            "id": self.id,
            "session": self.session_key,
            "title": self.title,
            "status": self.status,
            "depends_on": list(self.depends_on),
            "agent_type": self.agent_type,
            "agent_id": self.agent_id,
            "result": result,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
        }


def ready_todos(todos: Sequence[Todo]) -> list[Todo]:
    """The pending todos whose dependencies are all done, in order of creation."""
    done = {t.id for t in todos if t.status == "done"}
    return [t for t in todos if t.status == "pending" and set(t.depends_on) <= done]


def _outcome_of(task: TaskRecord) -> tuple[str, str | None] | None:
    """The status a todo takes from its agent's record; None while it still works."""
    if task.status in ("completed", "idle"):
        return "done", task.result
    if task.status in ("failed", "cancelled"):
        return "failed", task.error or task.result or task.status
    return None


class TodoStore:
    """The ``todos`` rows. Each change is written with its ``todo.updated`` event."""

    def __init__(
        self, *, store: Store, events: EventLog, clock: Callable[[], float] = time.time
    ) -> None:
        self._store = store
        self._events = events
        self._clock = clock

    async def list(self, session_key: str | None = None) -> list[Todo]:
        """A session's todos (every session's when None) in order, statuses current."""
        query = select(_table).order_by(_table.c.session_key, _table.c.seq)
        if session_key is not None:
            query = query.where(_table.c.session_key == session_key)
        async with self._store.read() as conn:
            todos = [Todo.of(r) for r in (await conn.execute(query)).all()]
        if any(t.status == "in_progress" and t.agent_id for t in todos):
            todos = await self._store.transact(lambda conn: self._refresh_in(conn, todos))
        return todos

    def _refresh_in(self, conn: Connection, todos: Sequence[Todo]) -> builtins.list[Todo]:
        now = self._clock()
        fresh: builtins.list[Todo] = []
        events: builtins.list[Event] = []
        for todo in todos:
            task = None
            if todo.status == "in_progress" and todo.agent_id:
                task = TaskRepository.get_in(conn, todo.agent_id)
            outcome = _outcome_of(task) if task is not None else None
            if outcome is None:
                fresh.append(todo)
                continue
            status, result = outcome
            changed = conn.execute(
                update(_table)
                .where(*_key(todo.session_key, todo.id), _table.c.status == "in_progress")
                .values(status=status, result=result, updated_at=now)
            ).rowcount
            row = conn.execute(select(_table).where(*_key(todo.session_key, todo.id))).first()
            current = Todo.of(row) if row is not None else todo
            fresh.append(current)
            if changed:
                events.append(_event(current))
        self._events.add_in(conn, events)
        return fresh

    async def get(self, session_key: str, todo_id: str) -> Todo:
        """One todo, current.

        Raises:
            ToolRetry: there is no such todo in the session.
        """
        found = next((t for t in await self.list(session_key) if t.id == todo_id), None)
        if found is None:
            raise ToolRetry(f"no todo {todo_id!r} in this session (todo list shows them)")
        return found

    async def add(
        self,
        session_key: str,
        *,
        todo_id: str,
        title: str,
        prompt: str = "",
        agent_type: str = "general-purpose",
        depends_on: Sequence[str] = (),
        message_id: str | None = None,
    ) -> tuple[Todo, bool]:
        """Add a todo; adding an id that exists returns the existing one unchanged (so a
        rerun of the same message after a restart adds nothing twice).

        Raises:
            ToolRetry: a bad id, an empty title, or a dependency that does not exist.
        """
        if not _ID.match(todo_id):
            raise ToolRetry(
                f"todo id {todo_id!r} must be a short slug: lowercase letters, digits, '.', "
                "'_' or '-' (e.g. 'write-tests')"
            )
        title = " ".join(title.split())
        if not title:
            raise ToolRetry("a todo needs a title")
        wanted = list(dict.fromkeys(d.strip() for d in depends_on if d.strip()))
        if todo_id in wanted:
            raise ToolRetry("a todo cannot depend on itself")
        now = self._clock()

        def job(conn: Connection) -> tuple[Todo, bool]:
            row = conn.execute(select(_table).where(*_key(session_key, todo_id))).first()
            if row is not None:
                return Todo.of(row), False
            known = {
                r[0]
                for r in conn.execute(
                    select(_table.c.id).where(_table.c.session_key == session_key)
                ).all()
            }
            missing = [d for d in wanted if d not in known]
            if missing:
                raise ToolRetry(f"unknown dependencies {', '.join(missing)}: add those todos first")
            if len(known) >= _MAX_TODOS:
                raise ToolRetry(f"a session holds at most {_MAX_TODOS} todos")
            seq = conn.execute(
                select(func.coalesce(func.max(_table.c.seq), 0)).where(
                    _table.c.session_key == session_key
                )
            ).scalar()
            values = {
                "session_key": session_key,
                "id": todo_id,
                "seq": int(seq or 0) + 1,
                "title": title,
                "prompt": prompt.strip() or title,
                "agent_type": agent_type,
                "depends_on": json.dumps(wanted),
                "status": "pending",
                "agent_id": None,
                "result": None,
                "created_at": now,
                "updated_at": now,
            }
            conn.execute(insert(_table).values(values))
            todo = Todo.of(conn.execute(select(_table).where(*_key(session_key, todo_id))).one())
            self._events.add_in(conn, [_event(todo, message_id)])
            return todo, True

        return await self._store.transact(job)

    async def set_status(
        self,
        session_key: str,
        todo_id: str,
        status: str,
        *,
        result: str | None = None,
        agent_id: str | None = None,
        when: str | None = None,
        message_id: str | None = None,
    ) -> Todo | None:
        """Change a todo's status (only if it is ``when``, if given).

        Returns:
            The todo as changed, or None when it was not in status ``when``.

        Raises:
            ToolRetry: an unknown status or todo.
        """
        if status not in TODO_STATUSES:
            raise ToolRetry(f"status must be one of {', '.join(TODO_STATUSES)}")
        values: dict[str, Any] = {"status": status, "updated_at": self._clock()}
        if result is not None:
            values["result"] = result
        if agent_id is not None:
            values["agent_id"] = agent_id

        def job(conn: Connection) -> Todo | None:
            query = update(_table).where(*_key(session_key, todo_id))
            if when is not None:
                query = query.where(_table.c.status == when)
            changed = conn.execute(query.values(values)).rowcount
            row = conn.execute(select(_table).where(*_key(session_key, todo_id))).first()
            if row is None:
                raise ToolRetry(f"no todo {todo_id!r} in this session (todo list shows them)")
            if not changed:
                return None
            todo = Todo.of(row)
            self._events.add_in(conn, [_event(todo, message_id)])
            return todo

        return await self._store.transact(job)


def _key(session_key: str, todo_id: str) -> tuple[Any, Any]:
    return (_table.c.session_key == session_key, _table.c.id == todo_id)


def _event(todo: Todo, message_id: str | None = None) -> Event:
    data = TodoUpdated(
        todo_id=todo.id, status=todo.status, title=todo.title, agent_id=todo.agent_id
    )
    return Event(session_key=todo.session_key, message_id=message_id, data=data)
