"""Finding sessions for people: newest first, by channel and by text, with unread counts.

What the web panel's Sessions page lists (through ``GET /v1/sessions``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from sqlalchemy import func, or_, select

from core.sessions import SessionInfo
from core.store.engine import Store
from core.store.models import HistoryRow, SessionRow

__all__ = ["SessionSearch"]

_sessions = SessionRow.__table__  # type: ignore[attr-defined]
_history = HistoryRow.__table__  # type: ignore[attr-defined]


class SessionSearch:
    """Reads the session list with filters; never writes."""

    def __init__(self, *, store: Store) -> None:
        self._store = store

    async def find(
        self, *, channel: str | None = None, text: str | None = None, limit: int = 1000
    ) -> list[SessionInfo]:
        """The most recently active sessions, newest first, with their unread counts.

        Args:
            channel: only the sessions of this channel (``cli``, ``slack``...).
            text: only sessions whose key or any history message contains it
                (case-insensitive; ``%`` and ``_`` are plain characters).
            limit: at most this many.
        """
        query = (
            select(
                _sessions.c.key,
                _sessions.c.channel,
                _sessions.c.created_at,
                _sessions.c.updated_at,
                _sessions.c.epoch,
                _sessions.c.message_count,
            )
            .order_by(_sessions.c.updated_at.desc(), _sessions.c.key)
            .limit(limit)
        )
        if channel:
            query = query.where(_sessions.c.channel == channel)
        if text:
            mentioned = select(_history.c.session_key).where(
                _history.c.content.icontains(text, autoescape=True)
            )
            query = query.where(
                or_(
                    _sessions.c.key.icontains(text, autoescape=True),
                    _sessions.c.key.in_(mentioned),
                )
            )
        async with self._store.read() as conn:
            rows = (await conn.execute(query)).all()
        return await self.with_unread([SessionInfo.of_row(r) for r in rows])

    async def with_unread(self, infos: Sequence[SessionInfo]) -> list[SessionInfo]:
        """``infos`` with their ``unread`` counts (replies kept while nobody watched)."""
        if not infos:
            return []
        query = (
            select(_history.c.session_key, func.count())
            .where(
                _history.c.session_key.in_([i.key for i in infos]),
                _history.c.unread.is_(True),
            )
            .group_by(_history.c.session_key)
        )
        async with self._store.read() as conn:
            counts = {key: int(n) for key, n in (await conn.execute(query)).all()}
        return [dataclasses.replace(i, unread=counts.get(i.key, 0)) for i in infos]

    async def channels(self) -> list[str]:
        """The channels that have sessions, by name."""
        query = select(_sessions.c.channel).distinct().order_by(_sessions.c.channel)
        async with self._store.read() as conn:
            return [str(c) for c in (await conn.execute(query)).scalars()]
