"""Entry vectors (table ``memory_vectors``, migration 0006) and nearest-neighbour search.

The backend is found once, when semantic recall starts: sqlite-vec loaded into the
store's SQLite connections, or pgvector when PostgreSQL has (or lets us create) the
``vector`` extension. Without one, the newest ``[memory.embeddings] scan_limit`` vectors
of the scopes are compared in Python (``scan_limit = 0``: no vector search, the
full-text path alone); the choice and why are logged once at INFO, and ``familiar
doctor`` reports the same probe (:func:`sqlite_vec_problem`, :func:`pgvector_state`).
Vectors are stored normalized: float32 blobs on SQLite, ``real[]`` on PostgreSQL (cast
to ``vector`` by pgvector at query time).
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import weakref
from array import array
from collections.abc import Sequence
from typing import Any, Literal

from sqlalchemy import Connection, bindparam, text
from sqlalchemy.ext.asyncio import AsyncConnection

from core.memory.search import Candidate
from core.store.engine import Store

__all__ = [
    "PGVECTOR_STATES",
    "Backend",
    "PgVectorState",
    "VectorIndex",
    "describe",
    "pgvector_state",
    "sqlite_vec_problem",
]

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


_UPSERT = text(
    "INSERT INTO memory_vectors (entry_id, model, dims, vector) VALUES (:id, :m, :d, :v) "
    "ON CONFLICT (entry_id) DO UPDATE SET model = excluded.model, dims = excluded.dims, "
    "vector = excluded.vector"
)
_PRESENT = "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
_AVAILABLE = "SELECT default_version FROM pg_available_extensions WHERE name = 'vector'"


def sqlite_vec_problem() -> str | None:
    """Why sqlite-vec cannot be loaded into this Python's SQLite; None when it can.

    Probed on a throwaway in-memory connection (blocking: call it in a thread).
    """
    if not hasattr(sqlite3.Connection, "enable_load_extension"):
        return (
            "this Python's sqlite3 cannot load extensions (built without "
            "--enable-loadable-sqlite-extensions)"
        )
    try:
        import sqlite_vec  # type: ignore[import-untyped]
    except ImportError:
        return "the sqlite-vec package is not installed (the memory extra)"
    probe = sqlite3.connect(":memory:")
    try:
        probe.enable_load_extension(True)
        probe.load_extension(sqlite_vec.loadable_path())
    except (sqlite3.Error, AttributeError) as exc:
        return f"sqlite-vec does not load: {exc}"
    finally:
        probe.close()
    return None


PgVectorState = Literal["created", "available", "missing"]
PGVECTOR_STATES: dict[PgVectorState, str] = {
    "created": "the vector extension is created in this database",
    "available": "the vector extension is installed on the server but not created in "
    "this database (the gateway tries CREATE EXTENSION at start)",
    "missing": "the vector extension is not installed on the server",
}


async def pgvector_state(conn: AsyncConnection) -> PgVectorState:
    """Whether PostgreSQL's ``vector`` extension is created, only installed, or missing."""
    if (await conn.execute(text(_PRESENT))).first() is not None:
        return "created"
    if (await conn.execute(text(_AVAILABLE))).first() is not None:
        return "available"
    return "missing"


def describe(backend: Backend, reason: str, scan_limit: int) -> str:
    """One line on how semantic recall searches vectors (the log line, doctor)."""
    what = {
        "sqlite-vec": "sqlite-vec (vectors searched inside SQLite)",
        "pgvector": "pgvector (vectors searched inside PostgreSQL)",
        "python": f"python fallback: the newest {scan_limit} vectors of the scopes "
        "compared in Python per recall ([memory.embeddings] scan_limit)",
        "none": "none: full-text recall only ([memory.embeddings] scan_limit = 0)",
    }[backend]
    return f"{what}; {reason}" if reason else what


class VectorIndex:
    """Stores entry vectors and finds the nearest ones among some scopes."""

    def __init__(
        self, *, store: Store, model: str, scan_limit: int, backend: Backend | None = None
    ) -> None:
        """``backend`` forces one (None: found by :meth:`detect`)."""
        self._store = store
        self._model = model
        self._scan_limit = scan_limit
        self._sqlite = store.is_sqlite
        self.backend: Backend | None = backend
        self.reason = "" if backend is None else "forced"
        """Why ``backend`` was chosen over a faster one ("" when nothing was missing)."""
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
        async with self._store.read() as conn:
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
            # An upsert: two passes racing over the same entries (a second gateway on
            # the same PostgreSQL) both succeed; the last vector wins.
            conn.execute(_UPSERT, kept)

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
        import sqlite_vec

        await driver.enable_load_extension(True)
        await driver.load_extension(sqlite_vec.loadable_path())
        await driver.enable_load_extension(False)
        self._loaded.add(driver)

    def describe(self) -> str:
        """How vectors are searched, in words (after :meth:`detect`)."""
        if self.backend is None:
            return "not probed yet"
        return describe(self.backend, self.reason, self._scan_limit)

    async def detect(self) -> Backend:
        """Find the backend now (once; logged at INFO with the reason for a fallback)."""
        if self.backend is not None:
            return self.backend
        async with self._store.read() as conn:
            return await self._detect(conn)

    async def _detect(self, conn: AsyncConnection) -> Backend:
        backend: Backend = "python" if self._scan_limit > 0 else "none"
        reason = ""
        if self._sqlite:
            problem = await asyncio.to_thread(sqlite_vec_problem)
            if problem is not None:
                reason = f"sqlite-vec unavailable: {problem}"
            else:
                try:
                    await self._load(conn)
                    backend = "sqlite-vec"
                except Exception as exc:
                    reason = f"sqlite-vec unavailable ({type(exc).__name__}: {exc})"
        else:
            backend, reason = await self._pgvector(backend)
        if self.backend is None:  # two first recalls at once: log the choice once
            self.backend, self.reason = backend, reason
            log.info("memory vector search: %s", self.describe())
        return self.backend

    async def _pgvector(self, fallback: Backend) -> tuple[Backend, str]:
        try:
            async with self._store.engine.begin() as conn:
                state = await pgvector_state(conn)
                if state == "missing":
                    return fallback, f"pgvector unavailable: {PGVECTOR_STATES[state]}"
                if state == "available":
                    # With store.schema, in public: it is the database's, for every schema.
                    where = " SCHEMA public" if self._store.schema else ""
                    await conn.execute(text(f"CREATE EXTENSION IF NOT EXISTS vector{where}"))
            return "pgvector", ""
        except Exception as exc:
            return fallback, f"pgvector unavailable ({str(exc).splitlines()[0][:200]})"
