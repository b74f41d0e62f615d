"""Session state and conversation history in the store."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sqlalchemy import delete, func, update
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from core.providers.base import ChatMessage, ToolCall
from core.store.engine import Store
from core.store.models import HistoryRow, InboundRow, SessionRow

__all__ = ["HistoryEntry", "SessionInfo", "SessionStore"]


@dataclass(frozen=True, slots=True)
class HistoryEntry:
    """A stored history message and its row id."""

    id: int
    message: ChatMessage


@dataclass(frozen=True, slots=True)
class SessionInfo:
    key: str
    channel: str
    created_at: float
    updated_at: float
    epoch: int
    message_count: int
    pending: int = 0

    def as_json(self) -> dict[str, object]:
        return {
            "key": self.key,
            "channel": self.channel,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "epoch": self.epoch,
            "messages": self.message_count,
            "pending": self.pending,
        }


def _to_row(key: str, epoch: int, inbound_id: str | None, m: ChatMessage, now: float) -> HistoryRow:
    calls = json.dumps([c.model_dump() for c in m.tool_calls]) if m.tool_calls else None
    return HistoryRow(
        session_key=key,
        epoch=epoch,
        inbound_id=inbound_id,
        role=m.role,
        content=m.content,
        tool_calls=calls,
        tool_call_id=m.tool_call_id,
        name=m.name,
        created_at=now,
    )


def _to_message(row: HistoryRow) -> ChatMessage:
    calls = tuple(ToolCall.model_validate(c) for c in json.loads(row.tool_calls or "[]"))
    return ChatMessage(
        role=row.role,  # type: ignore[arg-type]
        content=row.content,
        tool_calls=calls,
        tool_call_id=row.tool_call_id,
        name=row.name,
    )


class SessionStore:
    """Reads and writes sessions and their history."""

    def __init__(self, *, store: Store, clock: Callable[[], float] = time.time) -> None:
        self._store = store
        self._clock = clock

    async def get(self, key: str) -> SessionRow | None:
        async with self._store.read() as s:
            return await s.get(SessionRow, key)

    async def ensure(self, key: str, channel: str) -> SessionRow:
        async with self._store.write() as s:
            row = await s.get(SessionRow, key)
            if row is None:
                now = self._clock()
                row = SessionRow(key=key, channel=channel, created_at=now, updated_at=now)
                s.add(row)
            return row

    async def history(self, row: SessionRow) -> list[HistoryEntry]:
        """The current epoch's history not yet folded into the summary, oldest first."""
        query = (
            select(HistoryRow)
            .where(
                col(HistoryRow.session_key) == row.key,
                col(HistoryRow.epoch) == row.epoch,
                col(HistoryRow.id) > row.summary_upto,
            )
            .order_by(col(HistoryRow.id))
        )
        async with self._store.read() as s:
            rows = (await s.exec(query)).all()
        return [HistoryEntry(r.id or 0, _to_message(r)) for r in rows]

    def add_messages(
        self,
        s: AsyncSession,
        *,
        key: str,
        epoch: int,
        inbound_id: str | None,
        messages: Sequence[ChatMessage],
    ) -> None:
        """Stage history messages in an open write transaction."""
        now = self._clock()
        for m in messages:
            s.add(_to_row(key, epoch, inbound_id, m, now))

    async def discard_attempt(self, s: AsyncSession, *, key: str, inbound_id: str) -> int:
        """Drop what an interrupted earlier attempt of ``inbound_id`` wrote (not the user turn)."""
        res = await s.exec(
            delete(HistoryRow).where(
                col(HistoryRow.session_key) == key,
                col(HistoryRow.inbound_id) == inbound_id,
                col(HistoryRow.role) != "user",
            )
        )
        return int(res.rowcount)

    async def has_user_turn(self, s: AsyncSession, *, key: str, inbound_id: str) -> bool:
        found = await s.exec(
            select(HistoryRow.id).where(
                col(HistoryRow.session_key) == key,
                col(HistoryRow.inbound_id) == inbound_id,
                col(HistoryRow.role) == "user",
            )
        )
        return found.first() is not None

    async def touch(
        self, s: AsyncSession, *, key: str, added: int, summary: tuple[str, int] | None = None
    ) -> None:
        values: dict[str, object] = {
            "updated_at": self._clock(),
            "message_count": col(SessionRow.message_count) + added,
        }
        if summary is not None:
            values["summary"], values["summary_upto"] = summary
        await s.exec(update(SessionRow).where(col(SessionRow.key) == key).values(**values))

    async def new_epoch(self, key: str) -> int:
        """Start a fresh context (/new): history stays stored, the prompt forgets it."""
        async with self._store.write() as s:
            await s.exec(
                update(SessionRow)
                .where(col(SessionRow.key) == key)
                .values(
                    epoch=col(SessionRow.epoch) + 1,
                    summary=None,
                    summary_upto=0,
                    updated_at=self._clock(),
                )
            )
            row = await s.get(SessionRow, key)
            return row.epoch if row else 0

    async def list(self, *, limit: int = 1000) -> list[SessionInfo]:
        pending = (
            select(InboundRow.session_key, func.count())
            .where(col(InboundRow.status).in_(["pending", "claimed"]))
            .group_by(col(InboundRow.session_key))
        )
        query = select(SessionRow).order_by(col(SessionRow.updated_at).desc()).limit(limit)
        async with self._store.read() as s:
            counts = dict((await s.exec(pending)).all())
            rows = (await s.exec(query)).all()
        return [
            SessionInfo(
                key=r.key,
                channel=r.channel,
                created_at=r.created_at,
                updated_at=r.updated_at,
                epoch=r.epoch,
                message_count=r.message_count,
                pending=int(counts.get(r.key, 0)),
            )
            for r in rows
        ]

    async def all_history(self, key: str, *, limit: int = 1000) -> list[tuple[int, str, str]]:
        """(epoch, role, content) of the newest stored messages, oldest first (for display)."""
        query = (
            select(HistoryRow.epoch, HistoryRow.role, HistoryRow.content)
            .where(col(HistoryRow.session_key) == key)
            .order_by(col(HistoryRow.id).desc())
            .limit(limit)
        )
        async with self._store.read() as s:
            rows = (await s.exec(query)).all()
        return [(int(e), str(r), str(c)) for e, r, c in reversed(rows)]
