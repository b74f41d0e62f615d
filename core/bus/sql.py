"""The durable bus on the store's SQL database (SQLite by default, PostgreSQL to scale)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence

from sqlalchemy import and_, func, or_, select, update
from sqlmodel import col
from sqlmodel.ext.asyncio.session import AsyncSession

from core.bus.base import Claim, DueReply, Published
from core.bus.owner import owner_is_dead
from core.bus.signals import Signal, SignalMap
from core.messages import InboundMessage, OutboundMessage
from core.store.engine import Store
from core.store.models import DedupeRow, InboundRow, OutboundRow, SessionRow
from core.store.sql import insert_ignore

__all__ = ["DEDUPE_WINDOW_SECONDS", "SqlBus"]

log = logging.getLogger(__name__)

DEDUPE_WINDOW_SECONDS = 24 * 3600
CONTROL_COMMANDS = frozenset({"/stop"})


def is_control(text: str) -> bool:
    """Control messages may overtake a busy session's queue (``/stop`` must)."""
    return text.strip().split(" ", 1)[0].lower() in CONTROL_COMMANDS


class SqlBus:
    """Inbox and Outbox on SQL tables; in-process signals make wake-ups immediate."""

    def __init__(self, *, store: Store, clock: Callable[[], float] = time.time) -> None:
        self._store = store
        self._clock = clock
        self._inbound_signal = Signal()
        self._outbound_signals = SignalMap()

    # -- inbox ---------------------------------------------------------------------------

    async def publish_inbound(self, message: InboundMessage) -> Published:
        now = self._clock()
        dialect = self._store.dialect
        async with self._store.write() as s:
            if message.event_id:
                key = f"{message.delivery.channel}:{message.event_id}"
                first = await self._first_with_key(s, key, now)
                if first is not None:
                    return Published(first, duplicate=True)
                res = await s.exec(
                    insert_ignore(
                        dialect, DedupeRow, {"key": key, "message_id": message.id, "created_at": now}
                    )
                )
                if res.rowcount == 0:  # lost a race with a concurrent publish
                    first = await self._first_with_key(s, key, now)
                    return Published(first or message.id, duplicate=True)
            res = await s.exec(
                insert_ignore(
                    dialect,
                    InboundRow,
                    {
                        "id": message.id,
                        "session_key": message.session_key,
                        "status": "pending",
                        "control": is_control(message.text),
                        "payload": message.model_dump_json(),
                        "created_at": now,
                        "attempts": 0,
                    },
                )
            )
            if res.rowcount == 0:
                return Published(message.id, duplicate=True)
            await s.exec(
                insert_ignore(
                    dialect,
                    SessionRow,
                    {
                        "key": message.session_key,
                        "channel": message.delivery.channel,
                        "created_at": now,
                        "updated_at": now,
                        "epoch": 0,
                        "summary_upto": 0,
                        "message_count": 0,
                    },
                )
            )
        self._inbound_signal.set()
        return Published(message.id)

    @staticmethod
    async def _first_with_key(s: AsyncSession, key: str, now: float) -> str | None:
        row = await s.get(DedupeRow, key)
        if row is None:
            return None
        if row.created_at < now - DEDUPE_WINDOW_SECONDS:
            await s.delete(row)
            await s.flush()
            return None
        return row.message_id

    async def claim(self, *, owner: str, limit: int, lease_seconds: float) -> list[Claim]:
        if limit <= 0:
            return []
        now = self._clock()
        eligible = or_(
            col(InboundRow.status) == "pending",
            and_(col(InboundRow.status) == "claimed", col(InboundRow.lease_until) < now),
        )
        busy = select(InboundRow.session_key).where(
            col(InboundRow.status) == "claimed", col(InboundRow.lease_until) >= now
        )
        heads = (
            select(func.min(InboundRow.seq), InboundRow.session_key)
            .where(eligible, col(InboundRow.session_key).not_in(busy))
            .group_by(col(InboundRow.session_key))
            .order_by(func.min(InboundRow.seq))
            .limit(limit)
        )
        controls = (
            select(InboundRow.seq, InboundRow.session_key)
            .where(col(InboundRow.status) == "pending", col(InboundRow.control).is_(True))
            .order_by(col(InboundRow.seq))
            .limit(limit)
        )
        async with self._store.write() as s:
            picked: dict[int, str] = dict((await s.exec(heads)).all())
            control_seqs = {seq for seq, _ in (await s.exec(controls)).all()}
            picked.update((seq, "") for seq in control_seqs if seq not in picked)
            if not picked:
                return []
            if not self._store.is_sqlite:
                # Serialise claimers per session: lock the session rows, then re-check
                # eligibility with a fresh statement (READ COMMITTED sees their commits).
                keys = {k for k in picked.values() if k}
                lock = (
                    select(SessionRow.key)
                    .where(col(SessionRow.key).in_(keys))
                    .with_for_update(skip_locked=True)
                )
                locked = {k for (k,) in (await s.exec(lock)).all()}
                recheck = heads.where(col(InboundRow.session_key).in_(locked))
                fresh = {seq for seq, _ in (await s.exec(recheck)).all()}
                picked = {seq: k for seq, k in picked.items() if seq in fresh | control_seqs}
            rows = (
                await s.exec(
                    update(InboundRow)
                    .where(col(InboundRow.seq).in_(list(picked)), eligible)
                    .values(
                        status="claimed",
                        lease_owner=owner,
                        lease_until=now + lease_seconds,
                        attempts=col(InboundRow.attempts) + 1,
                    )
                    .returning(col(InboundRow.seq), col(InboundRow.payload), col(InboundRow.attempts))
                )
            ).all()
        rows = sorted(rows, key=lambda r: r[0])
        return [Claim(InboundMessage.model_validate_json(p), attempt=a) for _, p, a in rows]

    async def settle(
        self, message_id: str, *, owner: str, reply: OutboundMessage | None, failed: bool = False
    ) -> bool:
        now = self._clock()
        async with self._store.write() as s:
            res = await s.exec(
                update(InboundRow)
                .where(
                    col(InboundRow.id) == message_id,
                    col(InboundRow.status) == "claimed",
                    col(InboundRow.lease_owner) == owner,
                )
                .values(
                    status="failed" if failed else "done",
                    finished_at=now,
                    lease_owner=None,
                    lease_until=None,
                )
            )
            kept = res.rowcount == 1
            if reply is not None:
                await s.exec(
                    insert_ignore(
                        self._store.dialect,
                        OutboundRow,
                        {
                            "id": reply.id,
                            "inbound_id": reply.inbound_id,
                            "session_key": reply.session_key,
                            "channel": reply.delivery.channel,
                            "payload": reply.model_dump_json(),
                            "status": "pending",
                            "attempts": 0,
                            "next_attempt_at": now,
                            "created_at": now,
                        },
                    )
                )
        if reply is not None:
            self._outbound_signals.set(reply.delivery.channel)
        if not kept:
            log.warning("settled without a lease message_id=%s owner=%s", message_id, owner)
        return kept

    async def renew(self, message_ids: Sequence[str], *, owner: str, lease_seconds: float) -> None:
        if not message_ids:
            return
        async with self._store.write() as s:
            await s.exec(
                update(InboundRow)
                .where(
                    col(InboundRow.id).in_(list(message_ids)),
                    col(InboundRow.status) == "claimed",
                    col(InboundRow.lease_owner) == owner,
                )
                .values(lease_until=self._clock() + lease_seconds)
            )

    async def release(self, message_ids: Sequence[str], *, owner: str) -> None:
        if not message_ids:
            return
        async with self._store.write() as s:
            await s.exec(
                update(InboundRow)
                .where(
                    col(InboundRow.id).in_(list(message_ids)),
                    col(InboundRow.status) == "claimed",
                    col(InboundRow.lease_owner) == owner,
                )
                .values(status="pending", lease_owner=None, lease_until=None)
            )
        self._inbound_signal.set()

    async def release_dead_owners(
        self, *, is_dead: Callable[[str], bool] = owner_is_dead
    ) -> int:
        """Make messages leased by dead processes on this host claimable at once."""
        async with self._store.write() as s:
            owners = (
                await s.exec(
                    select(InboundRow.lease_owner)
                    .where(col(InboundRow.status) == "claimed")
                    .distinct()
                )
            ).all()
            dead = [o for (o,) in owners if o and is_dead(o)]
            if not dead:
                return 0
            res = await s.exec(
                update(InboundRow)
                .where(col(InboundRow.status) == "claimed", col(InboundRow.lease_owner).in_(dead))
                .values(status="pending", lease_owner=None, lease_until=None)
            )
        log.info("released leases of dead owners count=%d owners=%s", res.rowcount, dead)
        self._inbound_signal.set()
        return int(res.rowcount)

    async def wait_inbound(self, timeout: float) -> None:
        await self._inbound_signal.wait(timeout)

    # -- outbox --------------------------------------------------------------------------

    async def due_outbound(self, channel: str, *, limit: int) -> list[DueReply]:
        async with self._store.read() as s:
            rows = (
                await s.exec(
                    select(OutboundRow.payload, OutboundRow.attempts)
                    .where(
                        col(OutboundRow.channel) == channel,
                        col(OutboundRow.status) == "pending",
                        col(OutboundRow.next_attempt_at) <= self._clock(),
                    )
                    .order_by(col(OutboundRow.created_at))
                    .limit(limit)
                )
            ).all()
        return [DueReply(OutboundMessage.model_validate_json(p), int(a)) for p, a in rows]

    async def mark_delivered(self, outbound_id: str) -> bool:
        async with self._store.write() as s:
            res = await s.exec(
                update(OutboundRow)
                .where(col(OutboundRow.id) == outbound_id, col(OutboundRow.status) == "pending")
                .values(status="delivered", delivered_at=self._clock(), attempts=OutboundRow.attempts + 1)
            )
        return res.rowcount == 1

    async def mark_failed(self, outbound_id: str, *, error: str, retry_in: float | None) -> None:
        values: dict[str, object] = {
            "attempts": col(OutboundRow.attempts) + 1,
            "last_error": error[:2000],
        }
        if retry_in is None:
            values["status"] = "failed"
        else:
            values["next_attempt_at"] = self._clock() + retry_in
        async with self._store.write() as s:
            await s.exec(
                update(OutboundRow)
                .where(col(OutboundRow.id) == outbound_id, col(OutboundRow.status) == "pending")
                .values(**values)
            )

    async def wait_outbound(self, channel: str, timeout: float) -> None:
        await self._outbound_signals.wait(channel, timeout)
