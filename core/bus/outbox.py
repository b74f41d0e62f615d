"""The SQL bus's outbox: final replies stored for their channel, leased, marked once."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from sqlalchemy import Connection, Update, bindparam, select, update

from core.bus.base import DueReply
from core.bus.owner import owner_is_dead
from core.bus.signals import SignalMap
from core.bus.tables import OutboundRow
from core.bus.wakeups import Wakeups
from core.messages import OutboundMessage
from core.store.engine import Store
from core.store.prepared import Prepared
from core.store.sql import insert_ignore

__all__ = ["SqlOutbox", "reply_row"]

log = logging.getLogger(__name__)

_outbound = OutboundRow.__table__  # type: ignore[attr-defined]

_DELIVERED = Prepared(
    update(_outbound)
    .where(_outbound.c.id == bindparam("outbound_id"), _outbound.c.status == "pending")
    .values(
        status="delivered",
        delivered_at=bindparam("now"),
        attempts=_outbound.c.attempts + 1,
        lease_owner=None,
    )
)
_DUE_OUTBOUND = (
    select(_outbound.c.id)
    .where(
        _outbound.c.channel == bindparam("b_channel"),
        _outbound.c.status == "pending",
        _outbound.c.next_attempt_at <= bindparam("now"),
    )
    .order_by(_outbound.c.created_at)
    .limit(bindparam("limit"))
)
"""The ids of a channel's due replies, oldest first (at most ``limit``)."""


def _lease_outbound_statement(*, lock: bool) -> Update:
    """Take a channel's due replies: their next attempt moves to the lease's end.

    ``lock``: skip rows another transaction holds (PostgreSQL's concurrent senders).
    """
    due = _DUE_OUTBOUND
    if lock:
        due = due.with_for_update(skip_locked=True)
    return (
        update(_outbound)
        .where(
            _outbound.c.id.in_(due.scalar_subquery()),
            _outbound.c.status == "pending",
            _outbound.c.next_attempt_at <= bindparam("now"),
        )
        .values(next_attempt_at=bindparam("until"), lease_owner=bindparam("b_owner"))
        .returning(_outbound.c.payload, _outbound.c.attempts, _outbound.c.created_at)
    )


_LEASE_OUTBOUND = Prepared(_lease_outbound_statement(lock=False))
_LEASE_OUTBOUND_LOCKED = Prepared(_lease_outbound_statement(lock=True))
_DUE_REPLIES = _DUE_OUTBOUND.with_only_columns(_outbound.c.payload, _outbound.c.attempts)


def reply_row(reply: OutboundMessage, now: float) -> dict[str, object]:
    """The outbound table row of a final reply."""
    return {
        "id": reply.id,
        "inbound_id": reply.inbound_id,
        "session_key": reply.session_key,
        "channel": reply.delivery.channel,
        "payload": reply.model_dump_json(),
        "status": "pending",
        "attempts": 0,
        "next_attempt_at": now,
        "created_at": now,
    }


class SqlOutbox:
    """The outbox half of `core.bus.sql.SqlBus` (a part of it, like `SqlLookups`).

    A reply is stored once per id (by the settle that answers its message, or by
    `publish_outbound`), leased by the sender of its channel, and marked delivered
    exactly once.
    """

    _store: Store
    _clock: Callable[[], float]
    _owner: str
    _outbound_signals: SignalMap
    _wakeups: Wakeups | None

    def _announce(self, *notes: tuple[str, str]) -> None:
        if self._wakeups is not None:
            self._wakeups.announce(*notes)

    async def due_outbound(
        self, channel: str, *, limit: int, lease_seconds: float | None = None
    ) -> list[DueReply]:
        if lease_seconds is not None:
            return await self._lease_outbound(channel, limit=limit, lease_seconds=lease_seconds)
        params = {"b_channel": channel, "now": self._clock(), "limit": limit}
        async with self._store.read() as conn:
            rows = (await conn.execute(_DUE_REPLIES, params)).all()
        return [DueReply(OutboundMessage.model_validate_json(p), int(a)) for p, a in rows]

    async def _lease_outbound(
        self, channel: str, *, limit: int, lease_seconds: float
    ) -> list[DueReply]:
        """Take the due replies of ``channel`` for ``lease_seconds``: their next attempt
        moves past the lease, so no other process sends them meanwhile (a sender that dies
        mid-send leaves them due again when the lease ends: at least once, never twice
        at the same time)."""
        now = self._clock()
        statement = _LEASE_OUTBOUND if self._store.is_sqlite else _LEASE_OUTBOUND_LOCKED
        params = {
            "now": now,
            "b_channel": channel,
            "limit": limit,
            "until": now + lease_seconds,
            "b_owner": self._owner,
        }
        taken = await self._store.write_one(lambda conn: statement.rows(conn, params))
        rows = sorted(taken, key=lambda r: float(r[2]))
        return [DueReply(OutboundMessage.model_validate_json(p), int(a)) for p, a, _ in rows]

    async def release_outbound(self, outbound_ids: Sequence[str]) -> None:
        if not outbound_ids:
            return
        statement = (
            update(_outbound)
            .where(
                _outbound.c.id.in_(list(outbound_ids)),
                _outbound.c.status == "pending",
                _outbound.c.lease_owner == self._owner,
            )
            .values(next_attempt_at=self._clock(), lease_owner=None)
        )
        await self._store.write_one(lambda conn: conn.execute(statement))

    async def release_dead_senders(self, *, is_dead: Callable[[str], bool] = owner_is_dead) -> int:
        now = self._clock()

        def job(conn: Connection) -> int:
            owners = conn.execute(
                select(_outbound.c.lease_owner)
                .where(_outbound.c.status == "pending", _outbound.c.lease_owner.is_not(None))
                .distinct()
            ).all()
            dead = [o for (o,) in owners if o and is_dead(o)]
            if not dead:
                return 0
            res = conn.execute(
                update(_outbound)
                .where(_outbound.c.status == "pending", _outbound.c.lease_owner.in_(dead))
                .values(next_attempt_at=now, lease_owner=None)
            )
            return int(res.rowcount)

        count = await self._store.transact(job)
        if count:
            log.info("released deliveries of dead senders count=%d", count)
        return count

    async def publish_outbound(self, message: OutboundMessage) -> bool:
        row = reply_row(message, self._clock())
        dialect = self._store.dialect
        stored = await self._store.write_one(
            lambda conn: insert_ignore(dialect, _outbound).run(conn, row)
        )
        self._outbound_signals.set(message.delivery.channel)
        self._announce(("outbound", message.delivery.channel))
        return bool(stored == 1)

    async def mark_delivered(self, outbound_id: str) -> bool:
        now = self._clock()
        res = await self._store.write_one(
            lambda conn: _DELIVERED.run(conn, {"outbound_id": outbound_id, "now": now})
        )
        return bool(res == 1)

    async def mark_failed(self, outbound_id: str, *, error: str, retry_in: float | None) -> None:
        values: dict[str, object] = {
            "attempts": _outbound.c.attempts + 1,
            "last_error": error[:2000],
            "lease_owner": None,
        }
        if retry_in is None:
            values["status"] = "failed"
        else:
            values["next_attempt_at"] = self._clock() + retry_in
        await self._store.write_one(
            lambda conn: conn.execute(
                update(_outbound)
                .where(_outbound.c.id == outbound_id, _outbound.c.status == "pending")
                .values(**values)
            )
        )

    async def defer_outbound(self, outbound_id: str, *, reason: str, retry_in: float) -> None:
        values = {
            "last_error": reason[:2000],
            "lease_owner": None,
            "next_attempt_at": self._clock() + retry_in,
        }
        await self._store.transact(
            lambda conn: conn.execute(
                update(_outbound)
                .where(_outbound.c.id == outbound_id, _outbound.c.status == "pending")
                .values(**values)
            )
        )

    async def wait_outbound(self, channel: str, timeout: float) -> None:
        await self._outbound_signals.wait(channel, timeout)
