"""The memory service: remember, recall and forget, with scopes enforced here.

Scopes: a session reads its own scope (its session key) and ``global``; it writes
only its own scope, or ``global`` when it is a top-level session (not a subagent)
and ``[memory] allow_global_writes`` allows it. Anything else raises
:class:`~core.errors.MemoryRefused` with a message meant for the model. The
``*_any`` methods are the user's (the CLI): they may manage every scope.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from sqlalchemy import Connection, delete, func, insert, select

from core.errors import MemoryNotFound, MemoryRefused
from core.memory.config import MemoryConfig
from core.memory.models import MemoryRow
from core.memory.search import Candidate, FullTextSearch, query_terms, scope_token
from core.memory.semantic import SemanticRecall, blend
from core.store.engine import Store

__all__ = ["GLOBAL", "Caller", "MemoryEntry", "MemoryService", "ReadScope", "WriteScope"]

GLOBAL = "global"
ReadScope = Literal["session", "global", "all"]
WriteScope = Literal["session", "global"]
_DAY = 86_400.0
_RECENCY_WEIGHT = 0.3
"""Share of the score that recency can take away from an old entry."""
_MAX_TAG_CHARS = 64
_MAX_ID = 2**31 - 1
"""Entry ids are 32-bit on PostgreSQL: a larger id cannot exist (and would be an SQL
error there), so it is simply not found."""
_table = MemoryRow.__table__  # type: ignore[attr-defined]
_COLUMNS = (
    _table.c.id,
    _table.c.scope,
    _table.c.text,
    _table.c.tags,
    _table.c.source,
    _table.c.path,
    _table.c.created_at,
    _table.c.updated_at,
)


@dataclass(frozen=True, slots=True)
class Caller:
    """Who asks: a session key, and whether it is a top-level session (not a subagent).

    ``read_also``: scopes it may read but never write (an ``inherit-readonly``
    subagent's parent scope).
    """

    session_key: str
    top_level: bool = True
    read_also: tuple[str, ...] = ()

    @classmethod
    def of(cls, session_key: str, *, depth: int = 0, read_also: Sequence[str] = ()) -> Caller:
        top = depth == 0 and not session_key.startswith("subagent:")
        return cls(session_key, top, tuple(s for s in read_also if s != session_key))


@dataclass(frozen=True, slots=True)
class MemoryEntry:
    """One remembered entry, as the tools and the CLI show it."""

    id: int
    scope: str
    text: str
    tags: tuple[str, ...]
    source: str | None
    created_at: float
    updated_at: float
    path: str | None = None
    score: float | None = None

    def as_json(self) -> dict[str, Any]:
        found: dict[str, Any] = {
            "id": self.id,
            "scope": self.scope,
            "text": self.text,
            "tags": list(self.tags),
            "date": time.strftime("%Y-%m-%d", time.gmtime(self.updated_at)),
            "source": self.source,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
        }
        if self.score is not None:
            found["score"] = round(self.score, 4)
        return found


def _entry(row: Any, score: float | None = None) -> MemoryEntry:
    return MemoryEntry(
        id=int(row.id),
        scope=row.scope,
        text=row.text,
        tags=tuple(json.loads(row.tags or "[]")),
        source=row.source,
        created_at=float(row.created_at),
        updated_at=float(row.updated_at),
        path=row.path,
        score=score,
    )


class MemoryService:
    """Entries in the store, searched by full text and ranked by relevance and recency."""

    def __init__(
        self,
        *,
        store: Store,
        config: MemoryConfig,
        clock: Callable[[], float] = time.time,
        semantic: SemanticRecall | None = None,
    ) -> None:
        self._store = store
        self.semantic = semantic
        """Set when ``[memory.embeddings]`` is enabled: recall blends in vector similarity."""
        self.config = config
        self._clock = clock
        self._search = FullTextSearch(store.dialect)

    # -- what a session may do -------------------------------------------------------------

    def readable(self, caller: Caller, scope: ReadScope = "all") -> tuple[str, ...]:
        """The scope keys ``caller`` reads for ``scope``."""
        if scope == "session":
            return (caller.session_key,)
        if scope == "global":
            return (GLOBAL,)
        return (caller.session_key, *caller.read_also, GLOBAL)

    def global_write_refusal(self, caller: Caller) -> str | None:
        """Why ``caller`` may not write (or forget from) the global scope, else None.

        The one rule for every way into global memory: ``remember scope=global``,
        ``forget`` of a global entry, and the files of ``workspace/memory/``.
        """
        if not caller.top_level:
            return "a subagent may not write the global scope; use scope=session"
        if not self.config.allow_global_writes:
            return "global memory is read-only here ([memory] allow_global_writes)"
        return None

    def _writable(self, caller: Caller, scope: str) -> str:
        target = caller.session_key if scope == "session" else scope
        if target == caller.session_key:
            return target
        if target in caller.read_also and target != GLOBAL:
            raise MemoryRefused(
                f"scope {target!r} is read-only here (inherit-readonly): a subagent writes "
                "only its own scope; its handoff is the only way into its parent"
            )
        if target == GLOBAL:
            refusal = self.global_write_refusal(caller)
            if refusal is not None:
                raise MemoryRefused(refusal)
            return target
        raise MemoryRefused(
            f"scope {target!r} is not yours: you write only this session's scope or global"
        )

    async def remember(
        self,
        caller: Caller,
        text: str,
        *,
        tags: Sequence[str] = (),
        scope: str = "session",
        source: str | None = None,
    ) -> MemoryEntry:
        """Store ``text`` in ``scope`` (``session``, ``global`` or the caller's own key)."""
        target = self._writable(caller, scope)
        body, clean_tags = self._checked(text, tags)
        now, origin = self._clock(), source[:256] if source else None
        values = {
            "scope": target,
            "scope_token": scope_token(target),
            "text": body,
            "tags": json.dumps(clean_tags, ensure_ascii=False),
            "source": origin,
            "path": None,
            "created_at": now,
            "updated_at": now,
        }

        def job(conn: Connection) -> int:
            key = conn.execute(insert(_table).values(values)).inserted_primary_key
            assert key is not None
            return int(key[0])

        new_id = await self._store.transact(job)
        if self.semantic is not None:
            self.semantic.notify()  # embedded off the hot path; a failure never fails this
        return MemoryEntry(new_id, target, body, tuple(clean_tags), origin, now, now)

    def _checked(self, text: str, tags: Sequence[str]) -> tuple[str, list[str]]:
        body = text.strip()
        if not body:
            raise MemoryRefused("nothing to remember: the text is empty")
        if "\x00" in body or any("\x00" in t for t in tags):
            raise MemoryRefused(
                "the text or a tag contains a NUL (\\x00) control character: remove it"
            )
        if len(body) > self.config.max_entry_chars:
            raise MemoryRefused(
                f"the text has {len(body)} characters; an entry holds at most "
                f"{self.config.max_entry_chars} ([memory] max_entry_chars): split or shorten it"
            )
        clean = list(dict.fromkeys(t.strip() for t in tags if t.strip()))
        if len(clean) > self.config.max_tags:
            raise MemoryRefused(f"{len(clean)} tags; at most {self.config.max_tags} are allowed")
        if any(len(t) > _MAX_TAG_CHARS for t in clean):
            raise MemoryRefused(f"a tag may have at most {_MAX_TAG_CHARS} characters")
        return body, clean

    async def recall(
        self, caller: Caller, query: str, *, limit: int = 5, scope: ReadScope = "all"
    ) -> list[MemoryEntry]:
        """The best matches for ``query`` among the scopes ``caller`` reads."""
        return await self.search(query, scopes=self.readable(caller, scope), limit=limit)

    async def forget(self, caller: Caller, entry_id: int) -> MemoryEntry:
        """Delete entry ``entry_id`` if ``caller`` may write its scope."""
        found = await self.get(entry_id)
        if found is None or found.scope not in self.readable(caller):
            # Another scope's entry is answered exactly like a missing one: whether an
            # id exists in a scope the caller cannot read is not the caller's to know.
            raise MemoryNotFound(f"there is no memory #{entry_id}")
        self._writable(caller, found.scope)
        return await self.delete_any(entry_id)

    # -- the user's view (CLI), every scope ----------------------------------------------------

    async def search(
        self, query: str, *, scopes: Sequence[str] | None = None, limit: int = 20
    ) -> list[MemoryEntry]:
        """Matches for ``query`` in ``scopes`` (None: every scope), relevance and recency."""
        if not 1 <= limit <= 100:
            raise MemoryRefused("limit must be between 1 and 100")
        terms = query_terms(query)
        vector = None if self.semantic is None else await self.semantic.embed_query(query)
        async with self._store.read() as conn:
            if scopes is None:
                scopes = [r[0] for r in (await conn.execute(select(_table.c.scope).distinct()))]
            scopes = [k for k in scopes if "\x00" not in k]
            if not scopes:
                return []
            found = await self._search.candidates(conn, terms, scopes, max(limit * 4, 40))
            if vector is not None and self.semantic is not None:
                near = await self.semantic.nearest(conn, vector, scopes, max(limit * 4, 40))
                found = blend(found, near, self.semantic.config.weight)
        return self._ranked(found, limit)

    def _ranked(self, found: list[Candidate], limit: int) -> list[MemoryEntry]:
        now, half_life = self._clock(), self.config.recency_half_life_days * _DAY
        scored = []
        for c in found:
            fresh = 0.5 ** (max(0.0, now - c.updated_at) / half_life)
            scored.append((c.relevance * (1 - _RECENCY_WEIGHT + _RECENCY_WEIGHT * fresh), c))
        scored.sort(key=lambda pair: (-pair[0], -pair[1].updated_at))
        return [_entry(c, score) for score, c in scored[:limit]]

    async def scopes(self) -> list[tuple[str, int, float]]:
        """Every scope with entries: ``(scope, entries, newest update)``, newest first."""
        query = (
            select(_table.c.scope, func.count(), func.max(_table.c.updated_at))
            .group_by(_table.c.scope)
            .order_by(func.max(_table.c.updated_at).desc(), _table.c.scope)
        )
        async with self._store.read() as conn:
            rows = (await conn.execute(query)).all()
        return [(str(scope), int(count), float(newest)) for scope, count, newest in rows]

    async def list(self, *, scope: str | None = None, limit: int = 100) -> list[MemoryEntry]:
        """The newest entries (of one scope, if given)."""
        query = select(*_COLUMNS).order_by(_table.c.updated_at.desc(), _table.c.id.desc())
        if scope is not None and "\x00" in scope:  # no such scope (and no SQL error)
            return []
        if scope is not None:
            query = query.where(_table.c.scope == scope)
        async with self._store.read() as conn:
            rows = (await conn.execute(query.limit(limit))).all()
        return [_entry(r) for r in rows]

    async def get(self, entry_id: int) -> MemoryEntry | None:
        if not 0 < entry_id <= _MAX_ID:
            return None
        async with self._store.read() as conn:
            row = (await conn.execute(select(*_COLUMNS).where(_table.c.id == entry_id))).first()
        return None if row is None else _entry(row)

    async def delete_any(self, entry_id: int) -> MemoryEntry:
        """Delete an entry of any scope; a chunk of a memory file must be edited in the file."""
        found = await self.get(entry_id)
        if found is None:
            raise MemoryNotFound(f"there is no memory #{entry_id}")
        if found.path is not None:
            raise MemoryRefused(
                f"memory #{entry_id} is indexed from {found.path}: edit that file instead"
            )
        await self._store.transact(
            lambda conn: conn.execute(delete(_table).where(_table.c.id == entry_id))
        )
        return found
