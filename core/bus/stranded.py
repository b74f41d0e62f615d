"""Replies no channel of this gateway delivers: counted per channel, and given up on.

A reply whose channel is not running anywhere (disabled since, or never installed)
stays pending in the outbox: no `DeliveryWorker` takes it. The gateway asks which
channels deliver (its enabled channels and core's own consumers), shows the others'
pending replies in ``familiar status`` and ``doctor``, and after ``delivery.expire_after``
marks them failed, each with a ``delivery.failed`` event in the same transaction.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from functools import partial

from sqlalchemy import Connection, func, select, update

from core.bus.tables import OutboundRow
from core.event_data import DeliveryFailed
from core.events import Event, EventLog
from core.store.engine import Store

__all__ = ["StrandedChannel", "StrandedReplies"]

_outbound = OutboundRow.__table__  # type: ignore[attr-defined]
_BATCH = 500
"""Replies given up on per transaction (a sweep runs batches until none is left)."""


@dataclass(frozen=True, slots=True)
class StrandedChannel:
    """The pending replies of one channel that nothing delivers."""

    channel: str
    count: int
    oldest_at: float
    """When the oldest of them was written (epoch seconds)."""


class StrandedReplies:
    """Reads and expires pending replies of channels outside a set of delivering ones.

    Args:
        store: the open store.
        clock: epoch seconds (injected by tests).
    """

    def __init__(self, *, store: Store, clock: Callable[[], float] = time.time) -> None:
        self._store = store
        self._clock = clock

    async def stranded(self, delivering: Collection[str]) -> list[StrandedChannel]:
        """Per channel not in ``delivering``: its pending replies and the oldest one's time."""
        query = (
            select(_outbound.c.channel, func.count(), func.min(_outbound.c.created_at))
            .where(_outbound.c.status == "pending", _outbound.c.channel.not_in(list(delivering)))
            .group_by(_outbound.c.channel)
            .order_by(_outbound.c.channel)
        )
        async with self._store.read() as conn:
            rows = (await conn.execute(query)).all()
        return [StrandedChannel(str(c), int(n), float(oldest)) for c, n, oldest in rows]

    async def expire(
        self, delivering: Collection[str], *, older_than: float, reason: Callable[[str], str]
    ) -> int:
        """Give up on the pending replies of channels not in ``delivering`` written more
        than ``older_than`` seconds ago: each is marked failed with ``reason(channel)`` as
        its error, and gets a ``delivery.failed`` event in the same transaction.

        Returns:
            How many replies were given up on (by this call: a reply another process
            gave up on at the same time is counted, and recorded, once).
        """
        total, channels = 0, list(delivering)
        while True:
            cutoff = self._clock() - older_than
            job = partial(_expire_batch, delivering=channels, cutoff=cutoff, reason=reason)
            found, given_up = await self._store.transact(job)
            total += given_up
            if found < _BATCH:
                return total


def _expire_batch(
    conn: Connection, *, delivering: list[str], cutoff: float, reason: Callable[[str], str]
) -> tuple[int, int]:
    """(replies found due, replies this transaction gave up on)."""
    due = (
        select(_outbound.c.id, _outbound.c.channel)
        .where(
            _outbound.c.status == "pending",
            _outbound.c.channel.not_in(delivering),
            _outbound.c.created_at < cutoff,
        )
        .order_by(_outbound.c.created_at)
        .limit(_BATCH)
    )
    by_channel: dict[str, list[str]] = {}
    found = 0
    for reply_id, channel in conn.execute(due):
        by_channel.setdefault(str(channel), []).append(str(reply_id))
        found += 1
    events = []
    for channel, ids in by_channel.items():
        error = reason(channel)
        given_up = conn.execute(
            update(_outbound)
            .where(_outbound.c.id.in_(ids), _outbound.c.status == "pending")
            .values(status="failed", lease_owner=None, last_error=error)
            .returning(
                _outbound.c.id,
                _outbound.c.inbound_id,
                _outbound.c.session_key,
                _outbound.c.attempts,
            )
        ).all()
        for reply_id, inbound_id, session_key, attempts in given_up:
            data = DeliveryFailed(
                channel=channel, reply_id=str(reply_id), attempts=int(attempts), error=error
            )
            events.append(Event(session_key=str(session_key), message_id=inbound_id, data=data))
    EventLog.add_in(conn, events)
    return found, len(events)
