"""``familiar doctor``'s memory check: how semantic recall would search vectors here.

Probed locally, the way the gateway decides at start: sqlite-vec loaded into this
Python's SQLite, or PostgreSQL's ``vector`` extension; otherwise the Python fallback
(the newest ``scan_limit`` vectors compared per recall). Nothing is created or changed.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from core.errors import StoreError
from core.memory.vectors import (
    PGVECTOR_STATES,
    Backend,
    describe,
    pgvector_state,
    sqlite_vec_problem,
)
from core.store.engine import Store
from core.store.sqlite_file import sqlite_path
from gateway.commands.doctor_check import Check
from gateway.config import FamiliarConfig, store_url

__all__ = ["memory_checks"]

_NAME = "memory vector search"


async def memory_checks(home: Path, config: FamiliarConfig | None) -> list[Check]:
    """The semantic recall check (none when the config is invalid)."""
    if config is None:
        return []
    embeddings = config.memory.embeddings
    if not embeddings.enabled:
        return [Check(_NAME, True, "off ([memory.embeddings] enabled = false): full text")]
    fallback: Backend = "python" if embeddings.scan_limit > 0 else "none"
    url = store_url(home, config)
    if sqlite_path(url) is not None:
        problem = await asyncio.to_thread(sqlite_vec_problem)
        if problem is None:
            return [Check(_NAME, True, describe("sqlite-vec", "", embeddings.scan_limit))]
        reason = describe(fallback, f"sqlite-vec unavailable: {problem}", embeddings.scan_limit)
        return [Check(_NAME, True, reason, warn=True)]
    store = Store(url=url, config=config.store)
    try:
        await store.open(migrate=False)
        async with store.read() as conn:
            state = await pgvector_state(conn)
    except (StoreError, OSError, ImportError) as exc:
        return [Check(_NAME, False, f"cannot probe the store: {exc}")]
    finally:
        await store.close()
    if state == "missing":
        reason = describe(
            fallback, f"pgvector unavailable: {PGVECTOR_STATES[state]}", embeddings.scan_limit
        )
        return [Check(_NAME, True, reason, warn=True)]
    return [Check(_NAME, True, describe("pgvector", PGVECTOR_STATES[state], 0))]
