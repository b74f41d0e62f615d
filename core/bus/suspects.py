"""Suspects: messages whose last attempt was interrupted, retried one at a time.

A worker that dies (killed, out of memory, a tool that takes its process down)
interrupts every turn it was running, and each of those messages is charged an
attempt. Were they all retried together again, one message that kills its worker
would take the others down with it on every retry, until all of them gave up
(``agent.max_attempts``). So a message with an interrupted attempt on record
(``attempts > 0`` while claimable: a graceful release gives its attempt back) is a
*suspect*:

- the normal claim skips every session that has one (`SUSPECT_FREE`, in the claim's
  ``HAVING``), so the session's order holds and the suspect runs before its later
  messages;
- a suspect is claimed only by a runtime with no other turn running, one at a time
  (`SuspectClaims.claim_suspect`), and that runtime takes nothing else while it runs.

An innocent message is therefore charged at most once for another message's crash
(the run it shared with the culprit); every later interruption happens while it runs
alone, so the message that kills its worker is the one that ends with "gave up after
N interrupted attempts".
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from sqlalchemy import Connection, and_, bindparam, func, or_, select, update

from core.bus.base import Claim
from core.bus.tables import InboundRow
from core.messages import InboundMessage
from core.store.engine import Store
from core.store.prepared import Prepared

__all__ = ["BUSY", "ELIGIBLE", "SUSPECT_FREE", "SuspectClaims"]

log = logging.getLogger(__name__)

_inbound = InboundRow.__table__  # type: ignore[attr-defined]

SUSPECT_FREE = func.max(_inbound.c.attempts) == 0
"""``HAVING`` of a claim grouped by session: none of its claimable messages is a suspect."""

ELIGIBLE = or_(
    _inbound.c.status == "pending",
    and_(_inbound.c.status == "claimed", _inbound.c.lease_until < bindparam("now")),
)
"""Claimable: pending, or claimed by a lease that ran out."""
BUSY = select(_inbound.c.session_key).where(
    _inbound.c.status == "claimed", _inbound.c.lease_until >= bindparam("now")
)
"""Sessions with a live claim."""
_SUSPECT_HEAD = (
    select(func.min(_inbound.c.seq))
    .where(ELIGIBLE, _inbound.c.session_key.not_in(BUSY))
    .group_by(_inbound.c.session_key)
    .having(func.max(_inbound.c.attempts) > 0)
    .order_by(func.min(_inbound.c.seq))
    .limit(1)
)
"""The head of the oldest idle session that has a suspect."""
_ANY_SUSPECT = (
    select(_inbound.c.seq)
    .where(ELIGIBLE, _inbound.c.attempts > 0, _inbound.c.session_key.not_in(BUSY))
    .limit(1)
)
_CLAIM_SUSPECT = Prepared(
    update(_inbound)
    .where(_inbound.c.seq.in_(_SUSPECT_HEAD), ELIGIBLE)
    .values(
        status="claimed",
        lease_owner=bindparam("owner"),
        lease_until=bindparam("until"),
        attempts=_inbound.c.attempts + 1,
    )
    .returning(_inbound.c.payload, _inbound.c.attempts)
)


class SuspectClaims:
    """The bus's side of suspects (a part of `SqlBus`)."""

    _store: Store
    _clock: Callable[[], float]

    async def suspect_waiting(self) -> bool:
        """Whether a suspect is claimable now (a read: no write lock)."""
        async with self._store.read() as conn:
            found = await conn.execute(_ANY_SUSPECT, {"now": self._clock()})
            return found.first() is not None

    async def claim_suspect(self, *, owner: str, lease_seconds: float) -> Claim | None:
        """Lease the oldest suspect of an idle session, counting its attempt.

        The caller runs it alone: call this only with no turn of its own running, and
        claim nothing else until it is settled.
        """
        if not await self.suspect_waiting():
            return None  # the common case costs a read, not a write
        now = self._clock()
        params = {"now": now, "owner": owner, "until": now + lease_seconds}

        def job(conn: Connection) -> tuple[str, int] | None:
            row = _CLAIM_SUSPECT.first(conn, params)
            return None if row is None else (row[0], row[1])

        taken = await self._store.write_one(job)
        if taken is None:
            return None
        message = InboundMessage.model_validate_json(taken[0])
        log.info(
            "retrying alone after an interrupted attempt message_id=%s attempt=%d",
            message.id,
            taken[1],
        )
        return Claim(message, attempt=taken[1])
