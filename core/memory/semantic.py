"""Optional semantic recall: entries embedded in the background, recall blending vectors in.

``remember`` never calls the endpoint: it only wakes the background pass, which embeds
every entry without a vector (workspace file chunks too) in batches. A failed call is
logged once per outage and retried at the next pass; recall then ranks by full text
alone for ``retry_seconds``. So the full-text path never depends on the endpoint.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Sequence
from dataclasses import replace

from sqlalchemy.ext.asyncio import AsyncConnection

from core.background import BackgroundTask
from core.memory.config import EmbeddingsConfig
from core.memory.embeddings import EmbeddingClient, EmbeddingError
from core.memory.search import Candidate
from core.memory.vectors import Backend, VectorIndex
from core.store.engine import Store

__all__ = ["SemanticRecall", "blend"]

log = logging.getLogger(__name__)


def blend(text: Sequence[Candidate], near: Sequence[Candidate], weight: float) -> list[Candidate]:
    """Candidates scored ``(1 - weight) * full-text rank + weight * similarity``.

    The full-text relevance is scaled to 0..1 by the best of ``text``; an entry found
    by only one side scores 0 on the other.
    """
    top = max((c.relevance for c in text), default=0.0) or 1.0
    parts: dict[int, tuple[Candidate, float, float]] = {
        c.id: (c, c.relevance / top, 0.0) for c in text
    }
    for c in near:
        base, rank, _ = parts.get(c.id, (c, 0.0, 0.0))
        parts[c.id] = (base, rank, max(0.0, c.relevance))
    return [
        replace(c, relevance=(1 - weight) * rank + weight * sim) for c, rank, sim in parts.values()
    ]


class SemanticRecall:
    """The embeddings client, the vector index and the background embedding pass."""

    def __init__(
        self, *, store: Store, config: EmbeddingsConfig, backend: Backend | None = None
    ) -> None:
        """``backend`` forces the vector search backend (None: probed at start)."""
        self.config = config
        self.client = EmbeddingClient(config)
        self.index = VectorIndex(
            store=store, model=config.model, scan_limit=config.scan_limit, backend=backend
        )
        self._wake = asyncio.Event()
        self._worker = BackgroundTask("familiar-memory-embeddings")
        self._failed_at: float | None = None
        self.embedded = 0
        """Entries embedded by the background pass so far."""

    # -- recall ---------------------------------------------------------------------------

    async def embed_query(self, query: str) -> list[float] | None:
        """The query's vector, or None (endpoint failing: recall uses full text alone)."""
        failed = self._failed_at
        if failed is not None and time.monotonic() - failed < self.config.retry_seconds:
            return None
        try:
            (vector,) = await self.client.embed([query])
        except EmbeddingError as exc:
            self._failed(exc)
            return None
        self._recovered()
        return vector

    async def nearest(
        self, conn: AsyncConnection, vector: Sequence[float], scopes: Sequence[str], limit: int
    ) -> list[Candidate]:
        return await self.index.nearest(conn, vector, scopes, limit)

    # -- background pass ------------------------------------------------------------------

    def notify(self) -> None:
        """New entries may lack a vector: run the pass now."""
        self._wake.set()

    async def start(self) -> None:
        """Find the vector search backend (logged once) and start the background pass."""
        try:
            await self.index.detect()
        except Exception:  # the store hiccuped: the first recall detects instead
            log.exception("memory vector search: probing the backend failed")
        self._worker.start(self._loop)

    async def stop(self) -> None:
        await self._worker.stop()
        await self.client.aclose()

    async def _loop(self) -> None:
        while True:
            try:
                await self.run_once()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("memory embedding pass failed")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.config.poll_seconds)
            self._wake.clear()

    async def run_once(self) -> int:
        """Embed every entry that has no vector yet; returns how many were embedded."""
        done = 0
        while batch := await self.index.missing(self.config.batch):
            try:
                vectors = await self.client.embed([t for _, t in batch])
            except EmbeddingError as exc:
                self._failed(exc)
                break
            self._recovered()
            await self.index.put([(i, v) for (i, _), v in zip(batch, vectors, strict=True)])
            done += len(batch)
            self.embedded += len(batch)
        return done

    def _failed(self, exc: EmbeddingError) -> None:
        if self._failed_at is None:
            log.warning("memory embeddings endpoint failing, full-text recall only: %s", exc)
        self._failed_at = time.monotonic()

    def _recovered(self) -> None:
        if self._failed_at is not None:
            log.info("memory embeddings endpoint answers again")
        self._failed_at = None
