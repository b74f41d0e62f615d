"""Entry vectors (table ``memory_vectors``, migration 0006) and nearest-neighbour search.

The backend is found once: sqlite-vec loaded into the store's SQLite connections, or
pgvector when PostgreSQL has (or lets us create) the ``vector`` extension. Without one,
the newest ``[memory.embeddings] scan_limit`` vectors of the scopes are compared in
Python (``scan_limit = 0``: no vector search, the full-text path alone); the choice is
logged once. Vectors are stored normalized: float32 blobs on SQLite, ``real[]`` on
PostgreSQL (cast to ``vector`` by pgvector at query time).
"""

from __future__ import annotations

import logging
import weakref
from array import array
from collections.abc import Sequence
from typing import Any, Literal

from sqlalchemy import Connection, bindparam, text
from sqlalchemy.ext.asyncio import AsyncConnection

from core.memory.search import Candidate
from core.store.engine import Store

__all__ = ["Backend", "VectorIndex"]

log = logging.getLogger(__name__)

Backend = Literal["sqlite-vec", "pgvector", "python", "none"]
_COLUMNS = "e.id, e.scope, e.text, e.tags, e.source, e.path, e.created_at, e.updated_at"
_FROM = (
    "FROM memory_vectors v JOIN memory_entries e ON e.id = v.entry_id "
    "WHERE v.model = :m AND e.scope IN :scopes"
)
_SQL: dict[str, str] = {
    "sqlite-vec": f"SELECT {_COLUMNS}, 1 - vec_distance_cosine(v.vector, :q) AS sim {_FROM} "
    "ORDER BY sim DESC LIMIT :n",
    "pgvector": f"SELECT {_COLUMNS}, 1 - (CAST(v.vector AS vector) <=> CAST(:q AS vector)) "
    f"AS sim {_FROM} ORDER BY sim DESC LIMIT :n",
    "python": f"SELECT {_COLUMNS}, v.vector {_FROM} ORDER BY e.updated_at DESC LIMIT :n",
}
_MISSING = text(
    "SELECT e.id, e.text FROM memory_entries e LEFT JOIN memory_vectors v "
    "ON v.entry_id = e.id AND v.model = :m WHERE v.entry_id IS NULL ORDER BY e.id LIMIT :n"
)


class VectorIndex:
    """Stores entry vectors and finds the nearest ones among some scopes."""

    def __init__(self, *, store: Store, model: str, scan_limit: int) -> None:
        self._store = store
        self._model = model
        self._scan_limit = scan_limit
        self._sqlite = store.is_sqlite
        self.backend: Backend | None = None
        self._loaded: weakref.WeakSet[Any] = weakref.WeakSet()

    def _encode(self, vector: Sequence[float]) -> bytes | list[float]:
        return array("f", vector).tobytes() if self._sqlite else list(vector)

    @staticmethod
    def _decode(value: Any) -> list[float]:
        if isinstance(value, bytes | bytearray | memoryview):
            found = array("f")
            found.frombytes(bytes(value))
            return list(found)
        return [float(x) for x in value]

    async def missing(self, limit: int) -> list[tuple[int, str]]:
        """Entries without a vector of this model: ``(id, text)``, oldest first."""
        async with self._store.read() as s:
            conn = await s.connection()
            rows = await conn.execute(_MISSING, {"m": self._model, "n": limit})
            return [(int(r[0]), str(r[1])) for r in rows.all()]

    async def put(self, vectors: Sequence[tuple[int, Sequence[float]]]) -> None:
        """Store vectors (replacing older ones); entries deleted meanwhile are skipped."""
        rows = [{"id": i, "m": self._model, "d": len(v), "v": self._encode(v)} for i, v in vectors]

        def job(conn: Connection) -> None:
            ids = text("SELECT id FROM memory_entries WHERE id IN :ids").bindparams(
                bindparam("ids", expanding=True)
            )
            alive = {r[0] for r in conn.execute(ids, {"ids": [r["id"] for r in rows]})}
            kept = [r for r in rows if r["id"] in alive]
            if not kept:
                return
            conn.execute(
                text("DELETE FROM memory_vectors WHERE entry_id IN :ids").bindparams(
                    bindparam("ids", expanding=True)
                ),
                {"ids": [r["id"] for r in kept]},
            )
            conn.execute(
                text(
                    "INSERT INTO memory_vectors (entry_id, model, dims, vector) "
                    "VALUES (:id, :m, :d, :v)"
                ),
                kept,
            )

        if rows:
            await self._store.transact(job)

    async def nearest(
        self, conn: AsyncConnection, query: Sequence[float], scopes: Sequence[str], limit: int
    ) -> list[Candidate]:
        """Up to ``limit`` entries of ``scopes`` most similar to ``query`` (relevance =
        cosine similarity)."""
        backend = self.backend or await self._detect(conn)
        if backend == "none":
            return []
        if backend == "sqlite-vec":
            await self._load(conn)
        q: Any = self._encode(query)
        if backend == "pgvector":
            q = "[" + ",".join(f"{x:.7g}" for x in query) + "]"
        n = self._scan_limit if backend == "python" else limit
        statement = text(_SQL[backend]).bindparams(bindparam("scopes", expanding=True))
        rows = (
            await conn.execute(
                statement, {"m": self._model, "scopes": list(scopes), "q": q, "n": n}
            )
        ).all()
        if backend != "python":
            return [Candidate(*row) for row in rows]
        scored = []
        for row in rows:
            similarity = sum(a * b for a, b in zip(query, self._decode(row[8]), strict=False))
            scored.append(Candidate(*(*row[:8], similarity)))
        scored.sort(key=lambda c: -c.relevance)
        return scored[:limit]

    async def _load(self, conn: AsyncConnection) -> None:
        raw = await conn.get_raw_connection()
        driver = raw.driver_connection
        if driver is None or driver in self._loaded:
            return
        import sqlite_vec  # type: ignore[import-untyped]

        await driver.enable_load_extension(True)
        await driver.load_extension(sqlite_vec.loadable_path())
        await driver.enable_load_extension(False)
        self._loaded.add(driver)

    async def _detect(self, conn: AsyncConnection) -> Backend:
        backend: Backend = "python" if self._scan_limit > 0 else "none"
        reason = ""
        if self._sqlite:
            try:
                await self._load(conn)
                backend = "sqlite-vec"
            except Exception as exc:
                reason = f"sqlite-vec unavailable ({type(exc).__name__}: {exc})"
        else:
            backend, reason = await self._pgvector(backend)
        self.backend = backend
        log.info("memory vector search: %s%s", backend, f"; {reason}" if reason else "")
        return backend

    async def _pgvector(self, fallback: Backend) -> tuple[Backend, str]:
        present = "SELECT 1 FROM pg_extension WHERE extname = 'vector'"
        try:
            async with self._store.engine.begin() as conn:
                if (await conn.execute(text(present))).first() is None:
                    await conn.execute(text("CREATE EXTENSION IF NOT EXISTS vector"))
            return "pgvector", ""
        except Exception as exc:
            return fallback, f"pgvector unavailable ({str(exc).splitlines()[0][:200]})"
