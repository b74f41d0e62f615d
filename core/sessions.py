"""Session state and conversation history in the store."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from sqlalchemy import Connection, bindparam, delete, func, insert, select, update

from core.errors import StoreError
from core.messages import OutboundMessage
from core.providers.base import ChatMessage, ToolCall
from core.store.engine import Store
from core.store.models import HistoryRow, SessionRow
from core.store.prepared import Prepared
from core.store.sql import insert_ignore

__all__ = [
    "HistoryEntry",
    "SessionInfo",
    "SessionState",
    "SessionStore",
    "StoredMessage",
    "UnreadKeeper",
    "UnreadReply",
]

_sessions = SessionRow.__table__  # type: ignore[attr-defined]
_history = HistoryRow.__table__  # type: ignore[attr-defined]
_INSERT_HISTORY = Prepared(insert(_history))
_SESSION_COLUMNS = select(
    _sessions.c.key,
    _sessions.c.channel,
    _sessions.c.epoch,
    _sessions.c.summary,
    _sessions.c.summary_upto,
    _sessions.c.message_count,
).where(_sessions.c.key == bindparam("key"))
_SESSION = Prepared(_SESSION_COLUMNS)
_HISTORY_WINDOW = Prepared(
    select(
        _history.c.id,
        _history.c.role,
        _history.c.content,
        _history.c.tool_calls,
        _history.c.tool_call_id,
        _history.c.name,
        _history.c.inbound_id,
    )
    .where(
        _history.c.session_key == bindparam("key"),
        _history.c.epoch == bindparam("epoch"),
        _history.c.id > bindparam("after"),
    )
    .order_by(_history.c.id)
)
_TOUCH_STATEMENT = (
    update(_sessions)
    .where(_sessions.c.key == bindparam("b_key"))
    .values(
        updated_at=bindparam("now"), message_count=_sessions.c.message_count + bindparam("added")
    )
)
_TOUCH = Prepared(_TOUCH_STATEMENT)
_TOUCH_SUMMARY = Prepared(
    _TOUCH_STATEMENT.values(summary=bindparam("b_summary"), summary_upto=bindparam("upto"))
)
_DISCARD_ATTEMPT = Prepared(
    delete(_history).where(
        _history.c.session_key == bindparam("key"),
        _history.c.inbound_id == bindparam("inbound_id"),
        _history.c.role != "user",
    )
)


class UnreadKeeper(Protocol):
    """Where a channel puts a final reply nobody saw (kept in its session, unread)."""

    async def keep_unread(self, reply: OutboundMessage) -> None: ...


@dataclass(frozen=True, slots=True)
class UnreadReply:
    """A reply that arrived while nobody watched its session."""

    id: int
    message_id: str | None
    text: str
    created_at: float

    def as_json(self) -> dict[str, object]:
        return {
            "id": self.id,
            "message_id": self.message_id,
            "text": self.text,
            "at": self.created_at,
        }


@dataclass(frozen=True, slots=True)
class StoredMessage:
    """A history message as shown to people (``familiar sessions show``)."""

    epoch: int
    role: str
    content: str
    unread: bool = False
    message_id: str | None = None
    """The inbound message whose turn wrote it (None for one that came from elsewhere)."""
    created_at: float = 0.0
    id: int = 0
    """The history row's id (what ``mark_read``'s ``upto`` counts in)."""

    def as_json(self) -> dict[str, object]:
        return {
            "id": self.id,
            "epoch": self.epoch,
            "role": self.role,
            "content": self.content,
            "unread": self.unread,
            "message_id": self.message_id,
            "at": self.created_at,
        }


@dataclass(frozen=True, slots=True)
class HistoryEntry:
    """A stored history message and its row id."""

    id: int
    message: ChatMessage


@dataclass(frozen=True, slots=True)
class SessionState:
    """What a turn needs to know about its session."""

    key: str
    channel: str
    epoch: int
    summary: str | None
    summary_upto: int
    message_count: int


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """A session as listed; ``pending`` (queued messages) is filled in from the bus,
    ``unread`` (replies nobody saw yet) by `core.session_search`."""

    key: str
    channel: str
    created_at: float
    updated_at: float
    epoch: int
    message_count: int
    pending: int = 0
    unread: int = 0

    @classmethod
    def of_row(cls, row: Any) -> SessionInfo:
        """From a row of the sessions table with its ``message_count``."""
        return cls(
            key=row.key,
            channel=row.channel,
            created_at=row.created_at,
            updated_at=row.updated_at,
            epoch=row.epoch,
            message_count=row.message_count,
        )

    def as_json(self) -> dict[str, object]:
        return {
            "key": self.key,
            "channel": self.channel,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "epoch": self.epoch,
            "messages": self.message_count,
            "pending": self.pending,
            "unread": self.unread,
        }


def _row_values(
    key: str, epoch: int, inbound_id: str | None, m: ChatMessage, now: float
) -> dict[str, object]:
    calls = json.dumps([c.model_dump() for c in m.tool_calls]) if m.tool_calls else None
    return {
        "session_key": key,
        "epoch": epoch,
        "inbound_id": inbound_id,
        "role": m.role,
        "content": m.content,
        "tool_calls": calls,
        "tool_call_id": m.tool_call_id,
        "name": m.name,
        "created_at": now,
    }


_WindowRow = tuple[Any, ...]
"""A `_HISTORY_WINDOW` row: id, the message's five columns, inbound id."""


def _window(conn: Connection, state: SessionState) -> list[_WindowRow]:
    """The `_HISTORY_WINDOW` rows of ``state``, oldest first."""
    params = {"key": state.key, "epoch": state.epoch, "after": state.summary_upto}
    return _HISTORY_WINDOW.rows(conn, params)


def _entry(row: _WindowRow) -> HistoryEntry:
    return HistoryEntry(row[0], _to_message(*row[1:6]))


def _to_message(
    role: str, content: str, tool_calls: str | None, call_id: str | None, name: str | None
) -> ChatMessage:
    calls = tuple(ToolCall.model_validate(c) for c in json.loads(tool_calls or "[]"))
    return ChatMessage(
        role=role,
        content=content,
        tool_calls=calls,
        tool_call_id=call_id,
        name=name,
    )


class SessionStore:
    """Reads and writes sessions and their history.

    Methods ending in ``_in`` run inside a caller's transaction job (see Store.transact).
    """

    def __init__(self, *, store: Store, clock: Callable[[], float] = time.time) -> None:
        self._store = store
        self._clock = clock

    # -- inside a transaction job ----------------------------------------------------------

    def ensure_in(self, conn: Connection, key: str, channel: str) -> SessionState:
        row = _SESSION.first(conn, {"key": key})
        if row is None:
            now = self._clock()
            insert_ignore(self._store.dialect, _sessions).run(
                conn,
                {
                    "key": key,
                    "channel": channel,
                    "created_at": now,
                    "updated_at": now,
                    "epoch": 0,
                    "summary_upto": 0,
                    "message_count": 0,
                },
            )
            row = _SESSION.first(conn, {"key": key})
            if row is None:  # inserted just above, in this transaction
                raise StoreError(f"session {key} vanished while it was created")
        return SessionState(*row)

    def history_in(self, conn: Connection, state: SessionState) -> list[HistoryEntry]:
        """The current epoch's history not yet folded into the summary, oldest first."""
        return [_entry(r) for r in _window(conn, state)]

    def begin_turn_in(
        self, conn: Connection, state: SessionState, *, inbound_id: str, text: str
    ) -> list[HistoryEntry]:
        """Record the user turn of ``inbound_id`` once and return the history ending with it.

        A rerun (an earlier attempt recorded the user turn, then was interrupted) keeps
        that user turn and drops whatever else the earlier attempt wrote. The earlier
        attempt's rows are always in the current window: nothing of the session can
        start a new epoch or fold history past them while this message is unsettled
        (later messages of the session wait for it; compaction folds only what a
        settled turn dropped).
        """
        rows = _window(conn, state)
        if any(r[6] == inbound_id and r[1] == "user" for r in rows):
            _DISCARD_ATTEMPT.run(conn, {"key": state.key, "inbound_id": inbound_id})
            return [_entry(r) for r in rows if r[6] != inbound_id or r[1] == "user"]
        user = ChatMessage(role="user", content=text)
        key = _INSERT_HISTORY.insert(
            conn, _row_values(state.key, state.epoch, inbound_id, user, self._clock())
        )
        if key is None:  # a single-row INSERT of a table with an integer key always has one
            raise StoreError("the history row's id did not come back")
        history = [_entry(r) for r in rows]
        history.append(HistoryEntry(int(key), user))
        return history

    def add_messages_in(
        self,
        conn: Connection,
        *,
        key: str,
        epoch: int,
        inbound_id: str | None,
        messages: Sequence[ChatMessage],
    ) -> None:
        if not messages:
            return
        now = self._clock()
        _INSERT_HISTORY.many(conn, [_row_values(key, epoch, inbound_id, m, now) for m in messages])

    def touch_in(
        self, conn: Connection, *, key: str, added: int, summary: tuple[str, int] | None = None
    ) -> None:
        params: dict[str, object] = {"b_key": key, "now": self._clock(), "added": added}
        if summary is None:
            _TOUCH.run(conn, params)
        else:
            _TOUCH_SUMMARY.run(conn, {**params, "b_summary": summary[0], "upto": summary[1]})

    # -- standalone ----------------------------------------------------------------------

    async def get(self, key: str) -> SessionState | None:
        async with self._store.read() as conn:
            row = (await conn.execute(_SESSION_COLUMNS, {"key": key})).first()
        return None if row is None else SessionState(*row)

    async def new_epoch(self, key: str, channel: str) -> int:
        """Start a fresh context (/new): history stays stored, the prompt forgets it."""

        def job(conn: Connection) -> int:
            state = self.ensure_in(conn, key, channel)
            conn.execute(
                update(_sessions)
                .where(_sessions.c.key == key)
                .values(
                    epoch=state.epoch + 1, summary=None, summary_upto=0, updated_at=self._clock()
                )
            )
            return state.epoch + 1

        return await self._store.transact(job)

    async def count(self) -> int:
        """How many sessions exist."""
        async with self._store.read() as conn:
            return int(
                (await conn.execute(select(func.count()).select_from(_sessions))).scalar() or 0
            )

    async def list_sessions(self, *, limit: int = 1000) -> list[SessionInfo]:
        """The most recently active sessions, newest first."""
        return await self._infos(None, limit)

    async def info(self, key: str) -> SessionInfo | None:
        """One session as :meth:`list_sessions` describes it, or None when unknown."""
        found = await self._infos(key, 1)
        return found[0] if found else None

    async def _infos(self, key: str | None, limit: int) -> list[SessionInfo]:
        query = (
            select(
                _sessions.c.key,
                _sessions.c.channel,
                _sessions.c.created_at,
                _sessions.c.updated_at,
                _sessions.c.epoch,
                _sessions.c.message_count,
            )
            .order_by(_sessions.c.updated_at.desc())
            .limit(limit)
        )
        if key is not None:
            query = query.where(_sessions.c.key == key)
        async with self._store.read() as conn:
            rows = (await conn.execute(query)).all()
        return [SessionInfo.of_row(r) for r in rows]

    async def all_history(self, key: str, *, limit: int = 1000) -> list[StoredMessage]:
        """The newest stored messages, oldest first (for display)."""
        query = (
            select(
                _history.c.epoch,
                _history.c.role,
                _history.c.content,
                _history.c.unread,
                _history.c.inbound_id,
                _history.c.created_at,
                _history.c.id,
            )
            .where(_history.c.session_key == key)
            .order_by(_history.c.id.desc())
            .limit(limit)
        )
        async with self._store.read() as conn:
            rows = (await conn.execute(query)).all()
        return [
            StoredMessage(int(e), str(r), str(c), bool(u), m, float(t), int(i))
            for e, r, c, u, m, t, i in reversed(rows)
        ]

    # -- replies nobody saw ----------------------------------------------------------------

    async def keep_unread(self, reply: OutboundMessage) -> None:
        """Keep ``reply`` in its session's history, marked unread.

        A reply the session's own turn wrote (a schedule firing) is marked; one from
        elsewhere (a heartbeat check-in delivered here) is added as an assistant message,
        once: a repeated delivery finds and marks the same row.
        """

        def job(conn: Connection) -> None:
            found = conn.execute(
                select(_history.c.id)
                .where(
                    _history.c.session_key == reply.session_key,
                    _history.c.inbound_id == reply.inbound_id,
                    _history.c.role == "assistant",
                )
                .order_by(_history.c.id.desc())
                .limit(1)
            ).scalar()
            if found is not None:
                conn.execute(update(_history).where(_history.c.id == found).values(unread=True))
                return
            state = self.ensure_in(conn, reply.session_key, reply.delivery.channel)
            _INSERT_HISTORY.run(
                conn,
                {
                    **_row_values(
                        state.key,
                        state.epoch,
                        reply.inbound_id,
                        ChatMessage(role="assistant", content=reply.text),
                        self._clock(),
                    ),
                    "unread": True,
                },
            )
            self.touch_in(conn, key=state.key, added=1)

        await self._store.transact(job)

    async def unread(self, key: str, *, limit: int = 100) -> list[UnreadReply]:
        """The session's unread replies, oldest first."""
        query = (
            select(_history.c.id, _history.c.inbound_id, _history.c.content, _history.c.created_at)
            .where(_history.c.session_key == key, _history.c.unread.is_(True))
            .order_by(_history.c.id.desc())
            .limit(limit)
        )
        async with self._store.read() as conn:
            rows = (await conn.execute(query)).all()
        return [UnreadReply(int(i), m, str(c), float(t)) for i, m, c, t in reversed(rows)]

    async def mark_read(self, key: str, *, upto: int) -> int:
        """Mark the session's unread replies up to history id ``upto`` read; how many."""
        statement = (
            update(_history)
            .where(
                _history.c.session_key == key,
                _history.c.unread.is_(True),
                _history.c.id <= upto,
            )
            .values(unread=False)
        )
        return await self._store.transact(lambda conn: int(conn.execute(statement).rowcount))
