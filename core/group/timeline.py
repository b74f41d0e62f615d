"""The group timeline: an append-only history of joins, updates, leaves and expiries."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

import sqlalchemy as sa

from core.group.tables import group_timeline
from core.store.engine import Store

__all__ = ["TIMELINE_KINDS", "Timeline", "TimelineEntry", "TimelineKind", "append_entry"]

TimelineKind = Literal[
    "group.joined", "group.updated", "group.left", "group.expired", "group.forgotten"
]
TIMELINE_KINDS: tuple[TimelineKind, ...] = (
    "group.joined",
    "group.updated",
    "group.left",
    "group.expired",
    "group.forgotten",
)


@dataclass(frozen=True)
class TimelineEntry:
    """One event of the group: ``member`` joined, updated its snapshot, left or expired."""

    id: int
    at: datetime
    member: str
    kind: str
    detail: dict[str, Any]


def append_entry(
    conn: sa.Connection, member: str, kind: TimelineKind, detail: dict[str, Any]
) -> None:
    """Append one entry inside the caller's transaction (with the roster change it tells)."""
    conn.execute(sa.insert(group_timeline).values(member=member, kind=kind, detail=detail))


class Timeline:
    """Reads and prunes the timeline of the group (the store's shared schema)."""

    def __init__(self, store: Store) -> None:
        self.store = store

    async def recent(self, limit: int = 50) -> list[TimelineEntry]:
        """The newest ``limit`` entries, oldest first."""
        query = sa.select(group_timeline).order_by(group_timeline.c.id.desc()).limit(limit)
        rows = await self.store.fetch(query)
        return [
            TimelineEntry(
                id=row["id"],
                at=row["at"],
                member=row["member"],
                kind=row["kind"],
                detail=dict(row["detail"] or {}),
            )
            for row in reversed(rows)
        ]

    async def prune(self, retention_days: float) -> int:
        """Delete entries older than ``retention_days`` (by the database's clock)."""
        cutoff = sa.func.now() - sa.literal(timedelta(days=retention_days))
        statement = sa.delete(group_timeline).where(group_timeline.c.at < cutoff)

        def job(conn: sa.Connection) -> int:
            return conn.execute(statement).rowcount

        return await self.store.write_one(job)
