"""The bus: the durable queue on the store's SQL database (SQLite, or PostgreSQL to scale).

There is one bus and this is it; callers type against `SqlBus` (docs/design-notes.md,
"The bus is the store's queue"). The inbox is here, the outbox in `core.bus.outbox`,
the read-only lookups in `core.bus.lookups`, suspects in `core.bus.suspects`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence

from sqlalchemy import Connection, Update, bindparam, func, or_, select, update

from core.bus.base import Claim, OnceKey, Published
from core.bus.dedupe import DEDUPE_WINDOW_SECONDS, prune_once_in, take_in
from core.bus.lookups import SqlLookups
from core.bus.outbox import SqlOutbox, reply_row
from core.bus.owner import make_owner, owner_is_dead
from core.bus.reply_reads import ReplyReads
from core.bus.signals import KeyedWaiters, Signal, SignalMap
from core.bus.suspects import BUSY, SUSPECT_FREE, SuspectClaims
from core.bus.suspects import ELIGIBLE as _ELIGIBLE
from core.bus.tables import InboundRow, OutboundRow
from core.bus.wakeups import Wakeups
from core.messages import InboundMessage, OutboundMessage
from core.store.engine import Store
from core.store.models import SessionRow
from core.store.prepared import Prepared
from core.store.sql import insert_ignore

__all__ = ["DEDUPE_WINDOW_SECONDS", "SqlBus", "is_control"]

log = logging.getLogger(__name__)

MAX_REPLY_POLL = 8.0
"""Longest gap between a reply waiter's store reads (replies settled by other processes)."""
CONTROL_COMMANDS = frozenset({"/stop", "/status", "/answer", "/decline"})
"""Answered also while a turn runs (an MCP call may be waiting for that /answer)."""

_inbound = InboundRow.__table__  # type: ignore[attr-defined]
_outbound = OutboundRow.__table__  # type: ignore[attr-defined]
_sessions = SessionRow.__table__  # type: ignore[attr-defined]

_others = _inbound.alias("others")
_QUEUED_BESIDE = (
    select(_others.c.seq)
    .where(
        # Bound, not correlated: SQLite's RETURNING drops the table names of columns.
        _others.c.session_key == bindparam("b_session_key"),
        _others.c.id != bindparam("message_id"),
        # Not IN (...): a literal IN list is expanded into the SQL at every execution.
        or_(_others.c.status == "pending", _others.c.status == "claimed"),
    )
    .limit(1)
    .scalar_subquery()
)
"""Another message of the settled one's session still queued (or in another claim)."""
_SETTLE = Prepared(
    update(_inbound)
    .where(
        _inbound.c.id == bindparam("message_id"),
        _inbound.c.status == "claimed",
        _inbound.c.lease_owner == bindparam("owner"),
    )
    .values(
        status=bindparam("b_status"),
        finished_at=bindparam("now"),
        lease_owner=None,
        lease_until=None,
    )
    .returning(_QUEUED_BESIDE)
)
"""Settle a claim still held; returns a row (whether the session has more queued) if so."""
# The oldest claimable message of each idle session without a suspect, oldest first.
_HEADS = (
    select(func.min(_inbound.c.seq))
    .where(_ELIGIBLE, _inbound.c.session_key.not_in(BUSY))
    .group_by(_inbound.c.session_key)
    .having(SUSPECT_FREE)
    .order_by(func.min(_inbound.c.seq))
    .limit(bindparam("limit"))
)
_CONTROLS = (
    select(_inbound.c.seq)
    .where(_inbound.c.status == "pending", _inbound.c.control.is_(True))
    .order_by(_inbound.c.seq)
    .limit(bindparam("limit"))
)
# One statement, so a claim is one round trip and an empty one is cheap. Concurrent
# claimers (PostgreSQL, READ COMMITTED) stay one per session without locking the
# session rows: the heads come from one snapshot, where a session with a live claim is
# busy, and the UPDATE re-checks each head row it takes against the newest committed
# version (a head another claimer took, or that was settled since, is skipped). A head
# only ever leaves the eligible states, or comes back by a release of that same head.
_CLAIM = Prepared(
    update(_inbound)
    .where(or_(_inbound.c.seq.in_(_HEADS), _inbound.c.seq.in_(_CONTROLS)), _ELIGIBLE)
    .values(
        status="claimed",
        lease_owner=bindparam("owner"),
        lease_until=bindparam("until"),
        attempts=_inbound.c.attempts + 1,
    )
    .returning(_inbound.c.seq, _inbound.c.payload, _inbound.c.attempts)
)
_IDLE_MEMORY = 10_000
_PRUNE_ONCE_EVERY = 60.0
"""Seconds between deletions of a channel's expired one-time keys (per process)."""


def is_control(text: str) -> bool:
    """Control messages may overtake a busy session's queue (``/stop`` must)."""
    return text.strip().split(" ", 1)[0].lower() in CONTROL_COMMANDS


def _owned_claims(message_ids: Sequence[str], owner: str) -> Update:
    """An UPDATE of those messages that ``owner`` still holds the claim of."""
    return update(_inbound).where(
        _inbound.c.id.in_(list(message_ids)),
        _inbound.c.status == "claimed",
        _inbound.c.lease_owner == owner,
    )


class SqlBus(SqlLookups, SuspectClaims, SqlOutbox):
    """The bus on SQL tables; in-process signals make wake-ups immediate.

    Writes are jobs run by :meth:`Store.transact` (group-committed on SQLite), so a
    caller such as the turn layer can settle a message in the same transaction as
    its own writes via :meth:`settle_in`.
    """

    def __init__(
        self, *, store: Store, clock: Callable[[], float] = time.time, owner: str | None = None
    ) -> None:
        self._store = store
        self._clock = clock
        self._owner = owner or make_owner()
        """Who holds the delivery leases this bus takes (this process)."""
        self._inbound_signal = Signal()
        self._outbound_signals = SignalMap()
        self._reply_waiters: KeyedWaiters[OutboundMessage] = KeyedWaiters()
        self._reply_reads = ReplyReads(self.replies_of)
        self._session_idle: dict[str, bool] = {}
        """Settled message id -> whether its session had nothing else queued (from
        `settle_in` to `notify_reply`)."""
        self._wakeups: Wakeups | None = None
        self._once_pruned: dict[str, float] = {}
        """When this process last pruned each channel's one-time keys."""
        self.reply_poll_interval = 0.5
        """First re-read of the store by a reply waiter (for replies settled elsewhere);
        later ones back off to `MAX_REPLY_POLL`."""

    @property
    def dialect(self) -> str:
        return self._store.dialect

    def connect(self, wakeups: Wakeups) -> None:
        """Wake and be woken by the other processes sharing this database."""
        self._wakeups = wakeups
        wakeups.on("inbound", lambda _data, _peer: self._inbound_signal.set())
        wakeups.on("outbound", lambda channel, _peer: self._outbound_signals.set(channel))
        wakeups.on("reply", lambda message_id, _peer: self._reply_waiters.wake(message_id))

    # -- inbox ---------------------------------------------------------------------------

    async def publish_inbound(
        self, message: InboundMessage, *, once: OnceKey | None = None
    ) -> Published:
        now = self._clock()
        dialect = self._store.dialect
        channel = message.delivery.channel
        prune_before = self._once_prune_due(channel, once, now)

        def job(conn: Connection) -> Published:
            if prune_before is not None:
                prune_once_in(conn, channel, prune_before)
            if once is not None:
                key = once.row_key(channel)
                first = take_in(conn, dialect, key, message.id, now, once.seconds)
                if first is not None:
                    return Published(first, duplicate=True, replayed=True)
            if message.event_id:
                first = take_in(conn, dialect, f"{channel}:{message.event_id}", message.id, now)
                if first is not None:
                    return Published(first, duplicate=True)
            inserted = insert_ignore(dialect, _inbound).run(
                conn,
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
            if inserted == 0:
                return Published(message.id, duplicate=True)
            insert_ignore(dialect, _sessions).run(
                conn,
                {
                    "key": message.session_key,
                    "channel": channel,
                    "created_at": now,
                    "updated_at": now,
                    "epoch": 0,
                    "summary_upto": 0,
                    "message_count": 0,
                },
            )
            return Published(message.id)

        self._store.condition.refuse_new()
        published = await self._store.transact(job)
        if not published.duplicate:
            self._wake_claimers()
        return published

    def _once_prune_due(self, channel: str, once: OnceKey | None, now: float) -> float | None:
        """The cut-off for pruning ``channel``'s one-time keys in this publish, if due
        (they would otherwise pile up: one per signed request)."""
        if once is None or now - self._once_pruned.get(channel, 0.0) < _PRUNE_ONCE_EVERY:
            return None
        self._once_pruned[channel] = now
        return now - once.seconds

    async def claim(self, *, owner: str, limit: int, lease_seconds: float) -> list[Claim]:
        if limit <= 0:
            return []
        now = self._clock()
        params = {"now": now, "limit": limit, "owner": owner, "until": now + lease_seconds}

        def job(conn: Connection) -> list[tuple[int, str, int]]:
            return [(r[0], r[1], r[2]) for r in _CLAIM.rows(conn, params)]

        rows = sorted(await self._store.write_one(job))
        return [Claim(InboundMessage.model_validate_json(p), attempt=a) for _, p, a in rows]

    def settle_in(
        self,
        conn: Connection,
        message_id: str,
        *,
        owner: str,
        reply: OutboundMessage | None,
        failed: bool = False,
    ) -> bool:
        """The settle write inside a caller's transaction job; call :meth:`notify_reply` after.

        Returns False (and stores no reply) when ``owner`` no longer holds the claim: the
        message went to another attempt, which answers it.
        """
        now = self._clock()
        settled = _SETTLE.first(
            conn,
            {
                "message_id": message_id,
                "owner": owner,
                "b_status": "failed" if failed else "done",
                "now": now,
                "b_session_key": "" if reply is None else reply.session_key,
            },
        )
        if settled is None:
            return False
        if reply is not None:
            insert_ignore(self._store.dialect, _outbound).run(conn, reply_row(reply, now))
            self._remember_idle(message_id, idle=settled[0] is None)
        return True

    def _remember_idle(self, message_id: str, *, idle: bool) -> None:
        self._session_idle[message_id] = idle
        while len(self._session_idle) > _IDLE_MEMORY:  # settles whose commit failed
            del self._session_idle[next(iter(self._session_idle))]

    def notify_reply(self, reply: OutboundMessage | None) -> None:
        """Wake the reply's channel (after the settling transaction committed).

        Claimers are woken only when the session has more messages queued: a settle
        that leaves nothing to claim would otherwise send every agent worker to an
        empty claim (each publish wakes them already).
        """
        if reply is None:
            self._wake_claimers()
            return
        self._outbound_signals.set(reply.delivery.channel)
        self._reply_waiters.wake(reply.inbound_id, reply)
        self._announce(("outbound", reply.delivery.channel), ("reply", reply.inbound_id))
        if not self._session_idle.pop(reply.inbound_id, False):
            self._wake_claimers()

    def _wake_claimers(self) -> None:
        self._inbound_signal.set()
        self._announce(("inbound", ""))

    async def settle(
        self, message_id: str, *, owner: str, reply: OutboundMessage | None, failed: bool = False
    ) -> bool:
        kept = await self._store.transact(
            lambda conn: self.settle_in(conn, message_id, owner=owner, reply=reply, failed=failed)
        )
        self.notify_reply(reply)
        if not kept:
            log.warning("settled without a lease message_id=%s owner=%s", message_id, owner)
        return kept

    async def renew(
        self, message_ids: Sequence[str], *, owner: str, lease_seconds: float
    ) -> set[str]:
        """Extend the leases ``owner`` still holds; returns the ids it still holds."""
        if not message_ids:
            return set()
        until = self._clock() + lease_seconds
        statement = (
            _owned_claims(message_ids, owner).values(lease_until=until).returning(_inbound.c.id)
        )
        return await self._store.write_one(lambda conn: {mid for (mid,) in conn.execute(statement)})

    async def release(self, message_ids: Sequence[str], *, owner: str) -> None:
        if not message_ids:
            return
        # A graceful release is not a failed attempt: give the attempt back.
        statement = _owned_claims(message_ids, owner).values(
            status="pending",
            lease_owner=None,
            lease_until=None,
            attempts=_inbound.c.attempts - 1,
        )
        await self._store.write_one(lambda conn: conn.execute(statement))
        self._wake_claimers()

    async def release_dead_owners(self, *, is_dead: Callable[[str], bool] = owner_is_dead) -> int:
        """Make messages leased by dead processes on this host claimable at once."""

        def job(conn: Connection) -> tuple[int, list[str]]:
            owners = conn.execute(
                select(_inbound.c.lease_owner).where(_inbound.c.status == "claimed").distinct()
            ).all()
            dead = [o for (o,) in owners if o and is_dead(o)]
            if not dead:
                return 0, []
            res = conn.execute(
                update(_inbound)
                .where(_inbound.c.status == "claimed", _inbound.c.lease_owner.in_(dead))
                .values(status="pending", lease_owner=None, lease_until=None)
            )
            return int(res.rowcount), dead

        count, dead = await self._store.transact(job)
        if count:
            log.info("released leases of dead owners count=%d owners=%s", count, dead)
            self._wake_claimers()
        return count

    async def wait_inbound(self, timeout: float) -> None:
        await self._inbound_signal.wait(timeout)

    # -- waiting for replies -------------------------------------------------------------

    async def wait_reply(self, message_id: str, timeout: float | None) -> OutboundMessage | None:
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        poll = self.reply_poll_interval
        while True:
            # Registered before reading the store: a settle in between still wakes us.
            woken = self._reply_waiters.register(message_id)
            try:
                stored = await self._reply_reads.read(message_id)
                if stored is not None:
                    return stored
                budget = poll if deadline is None else min(poll, deadline - loop.time())
                if budget <= 0:
                    return None
                await asyncio.wait({woken}, timeout=budget)
                if woken.done() and (settled := woken.result()) is not None:
                    return settled  # settled in this process: no need to read it back
            finally:
                self._reply_waiters.discard(message_id, woken)
            # Settles in this process wake at once; polling only covers other processes,
            # so a long wait backs off instead of reading the store every second.
            poll = min(poll * 2, MAX_REPLY_POLL)
