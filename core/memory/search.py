"""Full-text search over memory entries, one interface for SQLite FTS5 and PostgreSQL.

A user's query is never handed to the search engine as syntax: it is cut into words
(letters and digits), each word quoted and OR-ed (a prefix match from three letters
on), so quotes, operators or a lone ``*`` cannot make an SQL or FTS syntax error.
Candidates come back ranked by the engine (bm25 / ts_rank_cd); the caller weighs in
recency.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import TextClause, bindparam, text
from sqlalchemy.ext.asyncio import AsyncConnection

from core.errors import MemoryRefused

__all__ = ["MAX_TERMS", "Candidate", "FullTextSearch", "query_terms", "scope_token"]

MAX_TERMS = 32
_WORD = re.compile(r"[^\W_]+")
_PREFIX_FROM = 3

_COLUMNS = "e.id, e.scope, e.text, e.tags, e.source, e.path, e.created_at, e.updated_at"

# The scope is in the index too (one token per scope, weight 0 in the ranking), so the
# engine intersects it with the words before ranking: a query with common words ranks
# the matches of two scopes, not those of every scope.
_SQLITE = text(
    f"SELECT {_COLUMNS}, -bm25(memory_fts, 1.0, 0.5, 0.0) AS relevance "
    "FROM memory_fts JOIN memory_entries e ON e.id = memory_fts.rowid "
    "WHERE memory_fts MATCH :q AND e.scope IN :scopes "
    "ORDER BY bm25(memory_fts, 1.0, 0.5, 0.0) LIMIT :n"
).bindparams(bindparam("scopes", expanding=True))

_POSTGRES = text(
    f"SELECT {_COLUMNS}, ts_rank_cd(e.tsv, to_tsquery('simple', :w)) AS relevance "
    "FROM memory_entries e, to_tsquery('simple', :q) AS q(query) "
    "WHERE e.tsv @@ q.query AND e.scope IN :scopes "
    "ORDER BY relevance DESC LIMIT :n"
).bindparams(bindparam("scopes", expanding=True))


def scope_token(scope: str) -> str:
    """The one search token standing for ``scope`` (letters and digits only)."""
    return "k" + hashlib.blake2b(scope.encode(), digest_size=10).hexdigest()


@dataclass(frozen=True, slots=True)
class Candidate:
    """A matching row and the engine's relevance (higher is better)."""

    id: int
    scope: str
    text: str
    tags: str
    source: str | None
    path: str | None
    created_at: float
    updated_at: float
    relevance: float


def query_terms(query: str) -> list[str]:
    """The words of ``query``, lowercased, deduplicated, at most :data:`MAX_TERMS`.

    Raises:
        MemoryRefused: the query has no letters or digits.
    """
    seen: dict[str, None] = {}
    for word in _WORD.findall(query.lower()):
        seen.setdefault(word, None)
    if not seen:
        raise MemoryRefused(
            "the query has no words to search for (give a few plain keywords; "
            "quotes and operators are ignored)"
        )
    return list(seen)[:MAX_TERMS]


class FullTextSearch:
    """Ranked full-text candidates on the store's dialect."""

    def __init__(self, dialect: str) -> None:
        self._postgres = dialect == "postgresql"

    def _match(self, terms: Sequence[str], scopes: Sequence[str]) -> tuple[TextClause, str, str]:
        tokens = [scope_token(s) for s in scopes]
        if self._postgres:
            words = " | ".join(f"{t}:*A" if len(t) >= _PREFIX_FROM else f"{t}:A" for t in terms)
            # Ranked by the words alone: cover density would count the scope token too.
            return _POSTGRES, f"({' | '.join(f'{k}:D' for k in tokens)}) & ({words})", words
        words = " OR ".join(f'"{t}"*' if len(t) >= _PREFIX_FROM else f'"{t}"' for t in terms)
        where = " OR ".join(f'"{k}"' for k in tokens)
        return _SQLITE, f"scope_token : ({where}) AND {{text tags}} : ({words})", words

    async def candidates(
        self, conn: AsyncConnection, terms: Sequence[str], scopes: Sequence[str], limit: int
    ) -> list[Candidate]:
        """Up to ``limit`` entries of ``scopes`` matching any of ``terms``, best first."""
        statement, match, words = self._match(terms, scopes)
        params = {"q": match, "scopes": list(scopes), "n": limit}
        if self._postgres:
            params["w"] = words
        rows = await conn.execute(statement, params)
        return [Candidate(*row) for row in rows.all()]
