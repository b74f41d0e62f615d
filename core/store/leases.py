"""Named leases in the database: one holder at a time across processes and hosts."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import Connection, delete, or_, select, update

from core.store.engine import Store
from core.store.models import LeaseRow
from core.store.sql import insert_ignore

__all__ = ["LeaseHolder", "Leases"]

_leases = LeaseRow.__table__  # type: ignore[attr-defined]


@dataclass(frozen=True, slots=True)
class LeaseHolder:
    """Who holds a lease and until when (unix seconds)."""

    owner: str
    until: float


class Leases:
    """Acquire, renew and release named leases (``leases`` table).

    A lease is free when nobody holds it or its ``until`` has passed; taking it and
    renewing it are the same conditional write, so two contenders never both hold it
    (on PostgreSQL the row lock serialises them; on SQLite the single writer does).
    """

    def __init__(self, *, store: Store, clock: Callable[[], float] = time.time) -> None:
        self._store = store
        self._clock = clock

    async def acquire(
        self,
        name: str,
        owner: str,
        *,
        seconds: float,
        is_dead: Callable[[str], bool] | None = None,
    ) -> bool:
        """Take or renew ``name`` for ``seconds``; True when ``owner`` holds it now.

        Args:
            is_dead: tells a holder that is certainly gone (a dead process on this
                host): its lease is taken at once instead of after it runs out.
        """
        now = self._clock()
        dialect = self._store.dialect
        row = {"name": name, "owner": owner, "until": now + seconds, "acquired_at": now}

        def take(conn: Connection, free: object) -> bool:
            res = conn.execute(
                update(_leases)
                .where(_leases.c.name == name, free)  # type: ignore[arg-type]
                .values(owner=owner, until=now + seconds)
            )
            return bool(res.rowcount == 1)

        def job(conn: Connection) -> tuple[bool, str | None]:
            if take(conn, _leases.c.owner == owner):
                return True, None
            holder = conn.execute(
                select(_leases.c.owner, _leases.c.until).where(_leases.c.name == name)
            ).first()
            if holder is None:
                return insert_ignore(dialect, _leases).run(conn, row) == 1, None
            if holder.until < now:
                ok = take(conn, _leases.c.until < now)
            else:
                return False, holder.owner
            if ok:
                conn.execute(update(_leases).where(_leases.c.name == name).values(acquired_at=now))
            return ok, None

        held, holder = await self._store.transact(job)
        if held or holder is None or is_dead is None or not is_dead(holder):
            return held

        def steal(conn: Connection) -> bool:
            ok = take(conn, or_(_leases.c.owner == holder, _leases.c.until < now))
            if ok:
                conn.execute(update(_leases).where(_leases.c.name == name).values(acquired_at=now))
            return ok

        return await self._store.transact(steal)

    async def release(self, name: str, owner: str) -> None:
        """Give ``name`` up if ``owner`` holds it (another contender may take it at once)."""
        await self._store.transact(
            lambda conn: conn.execute(
                delete(_leases).where(_leases.c.name == name, _leases.c.owner == owner)
            )
        )

    async def holder(self, name: str) -> LeaseHolder | None:
        """The current holder of ``name`` (None when free or run out)."""
        query = select(_leases.c.owner, _leases.c.until).where(_leases.c.name == name)
        async with self._store.read() as conn:
            row = (await conn.execute(query)).first()
        if row is None or row.until < self._clock():
            return None
        return LeaseHolder(row.owner, row.until)
