"""The SQLite writer counts its batches and jobs and the time it waited for and held the
cross-process write lock, and logs them when it closes."""

from __future__ import annotations

import asyncio
import fcntl
import logging
import os
import threading
from pathlib import Path

import pytest
from sqlalchemy import Connection, text

from core.store.engine import Store


def _one(conn: Connection) -> int:
    return int(conn.execute(text("SELECT 1")).scalar_one())


async def test_batches_jobs_and_lock_times_are_counted_and_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = Store(url=f"sqlite+aiosqlite:///{tmp_path / 'f.db'}")
    await store.open()
    writer = store._writer
    assert writer is not None
    before = writer.stats.jobs
    # Another process holds the write lock for a while: the writer waits for it.
    lock = os.open(tmp_path / "f.db-writer.lock", os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(lock, fcntl.LOCK_EX)
    released = threading.Timer(0.2, fcntl.flock, (lock, fcntl.LOCK_UN))
    released.start()
    try:
        assert await asyncio.gather(*(store.transact(_one) for _ in range(5))) == [1] * 5
    finally:
        released.join()
        os.close(lock)
    stats = writer.stats
    assert stats.jobs - before == 5
    assert stats.lock_wait_s >= 0.15
    assert 0 < stats.lock_held_s < stats.lock_wait_s
    with caplog.at_level(logging.INFO, logger="core.store.writer"):
        await store.close()
    closed = [r.getMessage() for r in caplog.records if "sqlite writer closed" in r.getMessage()]
    assert len(closed) == 1
    assert f"jobs={stats.jobs} " in closed[0] and "lock_wait_s=" in closed[0]
