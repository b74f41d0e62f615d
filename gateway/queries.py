"""Read-only queries the gateway needs for status, the control API and metrics."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal, cast

from sqlalchemy import func
from sqlmodel import col, select

from core.store.engine import Store
from core.store.models import EventRow, InboundRow, OutboundRow, SessionRow

__all__ = [
    "MessageStatus",
    "QueueCounts",
    "TailedEvent",
    "events_after",
    "inbound_channels_after",
    "last_event_id",
    "last_inbound_seq",
    "message_status",
    "queue_counts",
    "session_count",
]

Status = Literal["pending", "claimed", "done", "failed"]


@dataclass(frozen=True, slots=True)
class QueueCounts:
    """Inbound messages waiting (pending) and being worked on (claimed)."""

    pending: int = 0
    claimed: int = 0

    @property
    def depth(self) -> int:
        return self.pending + self.claimed


@dataclass(frozen=True, slots=True)
class MessageStatus:
    """Where an inbound message is, and its final reply once there is one."""

    message_id: str
    session: str
    status: Status
    reply_kind: str | None = None
    reply_text: str | None = None

    def as_json(self) -> dict[str, Any]:
        reply = None
        if self.reply_kind is not None:
            reply = {"kind": self.reply_kind, "text": self.reply_text or ""}
        return {
            "message_id": self.message_id,
            "session": self.session,
            "status": self.status,
            "reply": reply,
        }


@dataclass(frozen=True, slots=True)
class TailedEvent:
    """An event row read by the metrics tail."""

    id: int
    type: str
    data: dict[str, Any]


async def message_status(store: Store, message_id: str) -> MessageStatus | None:
    """The status and reply of inbound message ``message_id``; None when unknown."""
    async with store.read() as s:
        row = (
            await s.exec(
                select(InboundRow.session_key, InboundRow.status).where(
                    col(InboundRow.id) == message_id
                )
            )
        ).first()
        if row is None:
            return None
        payload = (
            await s.exec(
                select(OutboundRow.payload).where(col(OutboundRow.inbound_id) == message_id)
            )
        ).first()
    session, raw_status = row
    status = cast(Status, raw_status)
    if payload is None:
        return MessageStatus(message_id, session, status)
    reply = json.loads(payload)
    return MessageStatus(message_id, session, status, reply.get("kind"), reply.get("text"))


async def queue_counts(store: Store) -> QueueCounts:
    """How many inbound messages are pending and claimed, over every session."""
    query = (
        select(InboundRow.status, func.count())
        .where(col(InboundRow.status).in_(["pending", "claimed"]))
        .group_by(col(InboundRow.status))
    )
    async with store.read() as s:
        counts = {str(k): int(v) for k, v in (await s.exec(query)).all()}
    return QueueCounts(pending=counts.get("pending", 0), claimed=counts.get("claimed", 0))


async def session_count(store: Store) -> int:
    """How many sessions exist."""
    async with store.read() as s:
        return int((await s.exec(select(func.count()).select_from(SessionRow))).one())


async def last_inbound_seq(store: Store) -> int:
    """The newest inbound sequence number (0 when empty)."""
    async with store.read() as s:
        return int((await s.exec(select(func.max(InboundRow.seq)))).one() or 0)


async def last_event_id(store: Store) -> int:
    """The newest event id (0 when empty)."""
    async with store.read() as s:
        return int((await s.exec(select(func.max(EventRow.id)))).one() or 0)


async def inbound_channels_after(store: Store, seq: int, *, limit: int) -> list[tuple[int, str]]:
    """``(seq, channel)`` of inbound messages published after ``seq``, oldest first."""
    query = (
        select(InboundRow.seq, InboundRow.payload)
        .where(col(InboundRow.seq) > seq)
        .order_by(col(InboundRow.seq))
        .limit(limit)
    )
    async with store.read() as s:
        rows = (await s.exec(query)).all()
    out: list[tuple[int, str]] = []
    for number, payload in rows:
        delivery = json.loads(payload).get("delivery") or {}
        out.append((int(number or 0), str(delivery.get("channel", ""))))
    return out


async def events_after(
    store: Store, event_id: int, *, types: tuple[str, ...], limit: int
) -> list[TailedEvent]:
    """Events of ``types`` newer than ``event_id``, oldest first."""
    query = (
        select(EventRow.id, EventRow.type, EventRow.data)
        .where(col(EventRow.id) > event_id, col(EventRow.type).in_(types))
        .order_by(col(EventRow.id))
        .limit(limit)
    )
    async with store.read() as s:
        rows = (await s.exec(query)).all()
    return [TailedEvent(int(n or 0), str(k), json.loads(d)) for n, k, d in rows]
