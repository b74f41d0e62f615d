"""The group roster: one current snapshot per member, in the shared schema.

A member writes its own row (`Roster.announce` at start, on a change and at each
heartbeat; `Roster.leave` on a graceful stop) and every change worth telling is
appended to the timeline in the same transaction. Whether a member is ``gone`` is
decided when the roster is read (no heartbeat for ``expire_after`` by the database's
clock, so the hosts' clocks do not matter); `Roster.expire_stale` records it once.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.engine import RowMapping

from core.errors import ConfigError
from core.group.tables import GROUP_SCHEMA, ensure_group_tables, group_members
from core.group.timeline import TimelineKind, append_entry
from core.store.engine import Store

__all__ = ["Member", "MemberState", "Roster", "Snapshot"]

MemberState = Literal["active", "left", "gone"]


@dataclass(frozen=True)
class Member:
    """A member of the group as the roster shows it now."""

    name: str
    description: str
    capabilities: dict[str, list[str]]
    """``tools``/``agents``/``skills``/``channels`` -> names (only those it shares)."""
    host: str
    version: str
    started_at: datetime
    last_heartbeat: datetime
    state: MemberState
    """``active``; ``left`` (stopped gracefully); ``gone`` (no heartbeat for
    ``expire_after``)."""
    identity: str = ""
    """The first lines of its ``IDENTITY.md`` / ``SOUL.md``."""
    store_schema: str | None = None


@dataclass(frozen=True)
class Snapshot:
    """What a member announces about itself."""

    name: str
    description: str
    identity: str
    version: str
    capabilities: dict[str, list[str]]
    host: str
    store_schema: str | None
    started_at: datetime

    def announced(self) -> dict[str, Any]:
        """The parts peers compare to see whether it changed (not the times)."""
        return {
            "description": self.description,
            "identity": self.identity,
            "version": self.version,
            "capabilities": self.capabilities,
            "host": self.host,
        }


class Roster:
    """Reads (and, for this member, writes) the group roster.

    Args:
        store: the assistant's open store (PostgreSQL; the group tables are
            schema-qualified, whatever its ``store.schema``).
        expire_after: seconds without a heartbeat before a member is ``gone``.
    """

    def __init__(self, store: Store, *, expire_after: float) -> None:
        self.store = store
        self.expire_after = expire_after

    async def ensure_tables(self) -> None:
        """Create the shared schema and tables if missing (idempotent)."""
        async with self.store.engine.begin() as conn:
            await ensure_group_tables(conn)

    async def exists(self) -> bool:
        """Whether the shared tables exist (no member ever joined: they do not)."""
        name = f"{GROUP_SCHEMA}.{group_members.name}"
        found = sa.select(sa.func.to_regclass(name).is_not(None).label("found"))
        rows = await self.store.fetch(found)
        return bool(rows[0]["found"])

    async def members(self) -> list[Member]:
        """Every member ever announced (left and gone ones too), by name."""
        query = sa.select(group_members, sa.func.now().label("now")).order_by(group_members.c.name)
        return [self._member(row) for row in await self.store.fetch(query)]

    async def member(self, name: str) -> Member | None:
        """The member called ``name``, or None if it never joined."""
        query = sa.select(group_members, sa.func.now().label("now")).where(
            group_members.c.name == name
        )
        rows = await self.store.fetch(query)
        return self._member(rows[0]) if rows else None

    async def active(self) -> list[Member]:
        """The members that are active now."""
        return [m for m in await self.members() if m.state == "active"]

    def _state(self, row: RowMapping) -> MemberState:
        """A row's state as shown: a joined member without a recent heartbeat is gone.
        ``row`` carries the database's ``now``."""
        if row["state"] == "left":
            return "left"
        if row["state"] == "gone" or self._stale(row["now"], row["last_heartbeat"]):
            return "gone"
        return "active"

    def _member(self, row: RowMapping) -> Member:
        state = self._state(row)
        return Member(
            name=row["name"],
            description=row["description"],
            capabilities=_capabilities(row["capabilities"]),
            host=row["host"],
            version=row["version"],
            started_at=row["started_at"],
            last_heartbeat=row["last_heartbeat"],
            state=state,
            identity=row["identity"],
            store_schema=row["store_schema"],
        )

    def _stale(self, now: datetime, last: datetime) -> bool:
        return now - last > timedelta(seconds=self.expire_after)

    # -- this member's own row --------------------------------------------------------

    async def announce(self, snapshot: Snapshot, *, starting: bool = False) -> TimelineKind | None:
        """Write ``snapshot`` as this member's current row and refresh its heartbeat.

        Appends ``group.joined`` when starting or when the member was not active (left,
        or recorded gone), ``group.updated`` when what it announces changed, nothing on
        a plain heartbeat; returns that kind.

        Raises:
            ConfigError: an active member of another assistant has this name.
        """
        values = {
            "description": snapshot.description,
            "identity": snapshot.identity,
            "version": snapshot.version,
            "capabilities": snapshot.capabilities,
            "host": snapshot.host,
            "store_schema": snapshot.store_schema,
            "started_at": snapshot.started_at,
            "last_heartbeat": sa.func.now(),
            "state": "joined",
        }
        table = group_members

        def job(conn: sa.Connection) -> TimelineKind | None:
            # Replicas of one assistant share its name: the first insert wins, the others
            # update the row it made (locked, so each compares with the one before).
            insert = pg_insert(table).values(name=snapshot.name, **values)
            made = conn.execute(insert.on_conflict_do_nothing().returning(table.c.name))
            old = None
            if made.first() is None:
                query = (
                    sa.select(table, sa.func.now().label("now"))
                    .where(table.c.name == snapshot.name)
                    .with_for_update()
                )
                old = conn.execute(query).mappings().one()
                self._refuse_another_holder(old, snapshot)
                conn.execute(sa.update(table).where(table.c.name == snapshot.name).values(values))
            kind = _change(old, snapshot, starting=starting)
            if kind is not None:
                append_entry(conn, snapshot.name, kind, _detail(old, snapshot, kind))
            return kind

        return await self.store.transact(job)

    def _refuse_another_holder(self, row: RowMapping, snapshot: Snapshot) -> None:
        """Raise when the name is another assistant's (another ``store.schema``), active
        or not: a name stays with its assistant until the roster forgets it, so tasks
        meant for it, and peers' ``accept_from`` trust in it, never pass to another.
        Checked under the row's lock, so two assistants starting together, or one whose
        heartbeat comes back after another took the name, never share it."""
        if row["store_schema"] == snapshot.store_schema:
            return
        holder = f"store.schema {row['store_schema'] or '(unset)'} on {row['host']}"
        name = snapshot.name
        state = self._state(row)
        if state == "active":
            raise ConfigError(
                f"group.name {name!r} is taken by an active member of another assistant "
                f"({holder}): choose another group.name",
                key="group.name",
            )
        raise ConfigError(
            f"group.name {name!r} belongs to another assistant ({holder}, {state} since "
            f"{row['last_heartbeat']:%Y-%m-%d %H:%M} UTC): a name stays with its assistant "
            "until the roster forgets it (group.retention_days after it left); "
            f"`familiar group forget {name}` frees it now, or choose another group.name",
            key="group.name",
        )

    async def forget(self, name: str) -> Literal["forgotten", "active", "missing"]:
        """Delete ``name``'s entry so another assistant may take the name, unless the
        member is active; its timeline history stays."""
        table = group_members

        def job(conn: sa.Connection) -> Literal["forgotten", "active", "missing"]:
            query = (
                sa.select(table.c.state, table.c.last_heartbeat, sa.func.now().label("now"))
                .where(table.c.name == name)
                .with_for_update()
            )
            row = conn.execute(query).mappings().first()
            if row is None:
                return "missing"
            if self._state(row) == "active":
                return "active"
            conn.execute(sa.delete(table).where(table.c.name == name))
            append_entry(conn, name, "group.forgotten", {"by": "operator"})
            return "forgotten"

        return await self.store.transact(job)

    async def leave(self, name: str) -> bool:
        """Mark ``name`` left (a graceful stop) and append ``group.left`` once."""
        table = group_members

        def job(conn: sa.Connection) -> bool:
            update = (
                sa.update(table)
                .where(table.c.name == name, table.c.state != "left")
                .values(state="left", last_heartbeat=sa.func.now())
            )
            if conn.execute(update).rowcount == 0:
                return False
            append_entry(conn, name, "group.left", {})
            return True

        return await self.store.transact(job)

    async def expire_stale(self) -> list[str]:
        """Record every member without a heartbeat for ``expire_after`` as gone, with one
        ``group.expired`` each (whichever member notices first; the others find it done)."""
        table = group_members
        cutoff = sa.func.now() - sa.literal(timedelta(seconds=self.expire_after))

        def job(conn: sa.Connection) -> list[str]:
            update = (
                sa.update(table)
                .where(table.c.state == "joined", table.c.last_heartbeat < cutoff)
                .values(state="gone")
                .returning(table.c.name, table.c.last_heartbeat)
            )
            gone = conn.execute(update).all()
            for name, last in gone:
                append_entry(conn, name, "group.expired", {"last_heartbeat": last.isoformat()})
            return sorted(name for name, _ in gone)

        return await self.store.transact(job)

    async def forget_departed(self, retention_days: float) -> list[str]:
        """Delete the entries of members that left or went silent more than
        ``retention_days`` ago (the timeline's history of them goes at the same age)."""
        table = group_members
        cutoff = sa.func.now() - sa.literal(timedelta(days=retention_days))
        statement = (
            sa.delete(table)
            .where(table.c.state.in_(("left", "gone")), table.c.last_heartbeat < cutoff)
            .returning(table.c.name)
        )

        def job(conn: sa.Connection) -> list[str]:
            forgotten = sorted(conn.execute(statement).scalars())
            for name in forgotten:
                append_entry(conn, name, "group.forgotten", {"after_days": retention_days})
            return forgotten

        return await self.store.transact(job)


def _capabilities(raw: object) -> dict[str, list[str]]:
    """A row's capabilities as names; parts of another shape (a member of another
    version, a hand edit) are left out instead of failing every reader of the roster."""
    if not isinstance(raw, dict):
        return {}
    return {str(k): [str(n) for n in v] for k, v in raw.items() if isinstance(v, list)}


def _change(old: RowMapping | None, snapshot: Snapshot, *, starting: bool) -> TimelineKind | None:
    if old is None or starting or old["state"] != "joined":
        return "group.joined"
    before = {
        "description": old["description"],
        "identity": old["identity"],
        "version": old["version"],
        "capabilities": old["capabilities"],
        "host": old["host"],
    }
    return None if before == snapshot.announced() else "group.updated"


def _detail(old: RowMapping | None, snapshot: Snapshot, kind: TimelineKind) -> dict[str, Any]:
    if kind == "group.joined":
        return {
            "description": snapshot.description,
            "version": snapshot.version,
            "host": snapshot.host,
            "capabilities": snapshot.capabilities,
        }
    assert old is not None
    detail: dict[str, Any] = {}
    previous = old["capabilities"] or {}
    for part, names in snapshot.capabilities.items():
        was = set(previous.get(part, []))
        added, removed = sorted(set(names) - was), sorted(was - set(names))
        if added or removed:
            detail[part] = {"added": added, "removed": removed}
    for key in ("description", "identity", "version", "host"):
        if old[key] != getattr(snapshot, key):
            detail[key] = getattr(snapshot, key)
    return detail
