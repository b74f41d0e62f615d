"""Read-only queries on the bus tables: message status, queue counts, recent deliveries."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, cast

from sqlalchemy import BindParameter, Row, Select, bindparam, func, select

from core.bus.base import MessageState, MessageStatus, QueueCounts
from core.bus.tables import InboundRow, OutboundRow
from core.messages import Delivery, InboundMessage, OutboundMessage
from core.store.engine import Store

__all__ = ["SqlLookups"]

_inbound = InboundRow.__table__  # type: ignore[attr-defined]
_outbound = OutboundRow.__table__  # type: ignore[attr-defined]
_QUEUED = ("pending", "claimed")
_IN_CHUNK = 500
_RECENT_USER_SCAN = 20
_KEYS: BindParameter[str] = bindparam("keys", expanding=True)
"""The list a chunked IN query is run with (see `SqlLookups._rows_in`)."""
_REPLIES_OF = select(_outbound.c.inbound_id, _outbound.c.payload).where(
    _outbound.c.inbound_id.in_(_KEYS)
)
_STATES_OF = select(_inbound.c.id, _inbound.c.status).where(_inbound.c.id.in_(_KEYS))
_QUEUED_OF = (
    select(_inbound.c.session_key, func.count())
    .where(_inbound.c.status.in_(_QUEUED), _inbound.c.session_key.in_(_KEYS))
    .group_by(_inbound.c.session_key)
)


class SqlLookups:
    """The lookups of the SQL bus (reads only, through async sessions)."""

    _store: Store

    async def message_status(self, message_id: str) -> MessageStatus | None:
        async with self._store.read() as conn:
            row = (
                await conn.execute(
                    select(_inbound.c.session_key, _inbound.c.status).where(
                        _inbound.c.id == message_id
                    )
                )
            ).first()
            if row is None:
                return None
            payload = (
                await conn.execute(
                    select(_outbound.c.payload).where(_outbound.c.inbound_id == message_id)
                )
            ).scalar()
        reply = OutboundMessage.model_validate_json(payload) if payload is not None else None
        return MessageStatus(message_id, row.session_key, cast(MessageState, row.status), reply)

    async def replies_of(self, message_ids: Sequence[str]) -> dict[str, OutboundMessage]:
        """The stored final reply of each of ``message_ids`` that has one."""
        rows = await self._rows_in(message_ids, _REPLIES_OF)
        found: dict[str, OutboundMessage] = {}
        for inbound_id, payload in rows:
            found.setdefault(inbound_id, OutboundMessage.model_validate_json(payload))
        return found

    async def message_states(self, message_ids: Sequence[str]) -> dict[str, MessageState]:
        rows = await self._rows_in(message_ids, _STATES_OF)
        return {i: cast(MessageState, st) for i, st in rows}

    async def last_user_delivery(self, session_key: str) -> Delivery | None:
        query = (
            select(_inbound.c.payload)
            .where(_inbound.c.session_key == session_key)
            .order_by(_inbound.c.seq.desc())
            .limit(_RECENT_USER_SCAN)
        )
        async with self._store.read() as conn:
            payloads = (await conn.execute(query)).scalars().all()
        for payload in payloads:
            message = InboundMessage.model_validate_json(payload)
            if message.origin == "user":
                return message.delivery
        return None

    async def queue_counts(self, session_key: str | None = None) -> QueueCounts:
        query = (
            select(_inbound.c.status, func.count())
            .where(_inbound.c.status.in_(_QUEUED))
            .group_by(_inbound.c.status)
        )
        if session_key is not None:
            query = query.where(_inbound.c.session_key == session_key)
        async with self._store.read() as conn:
            counts = {str(k): int(v) for k, v in (await conn.execute(query)).all()}
        return QueueCounts(pending=counts.get("pending", 0), claimed=counts.get("claimed", 0))

    async def queued_by_session(self, session_keys: Sequence[str]) -> dict[str, int]:
        rows = await self._rows_in(session_keys, _QUEUED_OF)
        return {str(k): int(n) for k, n in rows}

    async def _rows_in(self, keys: Sequence[str], query: Select[Any, Any]) -> list[Row[Any, Any]]:
        """The rows of ``query`` (IN ``_KEYS``) over ``keys`` (duplicates dropped), asked
        ``_IN_CHUNK`` keys at a time so that no ``IN`` list grows without bound."""
        unique = list(dict.fromkeys(keys))
        rows: list[Row[Any, Any]] = []
        async with self._store.read() as conn:
            for start in range(0, len(unique), _IN_CHUNK):
                chunk = unique[start : start + _IN_CHUNK]
                rows.extend(await conn.execute(query, {"keys": chunk}))
        return rows

    async def newest_seq(self) -> int:
        async with self._store.read() as conn:
            return int((await conn.execute(select(func.max(_inbound.c.seq)))).scalar() or 0)

    async def channels_after(self, seq: int, *, limit: int) -> list[tuple[int, str]]:
        # The channel is inside the payload's delivery; parse it rather than add a column.
        query = (
            select(_inbound.c.seq, _inbound.c.payload)
            .where(_inbound.c.seq > seq)
            .order_by(_inbound.c.seq)
            .limit(limit)
        )
        async with self._store.read() as conn:
            rows = (await conn.execute(query)).all()
        return [(int(n), str(json.loads(p)["delivery"]["channel"])) for n, p in rows]
