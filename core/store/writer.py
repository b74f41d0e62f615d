"""Group commit for SQLite: one writer thread runs queued transactions back to back.

Through an async driver every SQL statement is a round trip through the event loop, and
SQLite allows one writer at a time, so under load the write lock is held across many
loop turns. Here a write is a plain function of a sync connection; a single thread runs
every queued function in one transaction and commits once (if one job fails, the batch
is rolled back and each job rerun alone, so a bad job never takes others down). The
loop pays one wake-up per batch.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine, event

from core.errors import StoreError

__all__ = ["Job", "SqliteWriter", "WriterStats"]

log = logging.getLogger(__name__)

T = TypeVar("T")
Job = Callable[[Connection], T]


@dataclass(slots=True)
class _Queued:
    job: Job[Any]
    future: asyncio.Future[Any]


def make_transactional(engine: Engine) -> None:
    """Let SQLAlchemy (not the sqlite3 module) own BEGIN, so SAVEPOINTs work; BEGIN IMMEDIATE."""

    @event.listens_for(engine, "connect")
    def _no_implicit_begin(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None

    @event.listens_for(engine, "begin")
    def _begin_immediate(conn: Connection) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE")


@dataclass(slots=True)
class WriterStats:
    """What a writer did: batches, jobs, and seconds spent waiting for and holding the
    write lock (the lock of every process sharing the file; logged at close)."""

    batches: int = 0
    jobs: int = 0
    lock_wait_s: float = 0.0
    lock_held_s: float = 0.0

    def add(self, jobs: int, *, waited: float, held: float) -> None:
        self.batches += 1
        self.jobs += jobs
        self.lock_wait_s += waited
        self.lock_held_s += held

    def __str__(self) -> str:
        return (
            f"batches={self.batches} jobs={self.jobs} "
            f"lock_wait_s={self.lock_wait_s:.3f} lock_held_s={self.lock_held_s:.3f}"
        )


class SqliteWriter:
    """Runs write jobs in one thread, batching whatever queued up while it was busy.

    Args:
        lock_path: a file the writers of every process ``flock`` around each batch
            (several role processes share the database). Waiting on it is woken by the
            kernel the moment the holder commits, where SQLite's own busy handler sleeps
            in steps growing to 100 ms; the busy timeout stays as the fallback.
    """

    def __init__(
        self, *, engine: Engine, max_batch: int = 500, lock_path: Path | None = None
    ) -> None:
        self._engine = engine
        self._lock_path = lock_path
        self._lock_fd: int | None = None
        self._max_batch = max_batch
        self._queue: list[_Queued] = []
        self._wake = asyncio.Event()
        self._thread = ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="familiar-sqlite-writer"
        )
        self._conn: Connection | None = None
        # The connection lives in the writer thread only.
        self._task: asyncio.Task[None] | None = None
        self._closing = False
        self.stats = WriterStats()

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="familiar-sqlite-writer")

    async def close(self) -> None:
        """Finish every job already submitted, then close; later submits fail."""
        self._closing = True
        self._wake.set()
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._thread, self._close_conn)
        self._thread.shutdown(wait=True)
        if self.stats.batches:
            log.info("sqlite writer closed %s", self.stats)

    async def submit(self, job: Job[T]) -> T:
        if self._closing:
            raise StoreError("the store is closed")
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._queue.append(_Queued(job, future))
        self._wake.set()
        return await future

    async def _run(self) -> None:
        in_flight: list[_Queued] = []
        try:
            while not (self._closing and not self._queue):
                await self._wake.wait()
                self._wake.clear()
                while self._queue:
                    in_flight = self._queue[: self._max_batch]
                    self._queue = self._queue[self._max_batch :]
                    try:
                        await self._commit(in_flight)
                    except Exception as exc:  # a bug here must not stop the writer for good
                        log.exception("sqlite writer failed a batch size=%d", len(in_flight))
                        _fail(in_flight, StoreError(f"the write failed: {exc}"))
                    in_flight = []
        finally:
            # Cancelled from outside (loop teardown): nobody may wait forever.
            _fail([*in_flight, *self._queue], StoreError("the store was closed mid-write"))
            self._queue = []

    async def _commit(self, batch: list[_Queued]) -> None:
        loop = asyncio.get_running_loop()
        try:
            outcomes = await loop.run_in_executor(self._thread, self._run_batch, batch)
        except Exception as exc:  # the commit itself failed: every job failed
            log.exception("sqlite batch commit failed size=%d", len(batch))
            outcomes = [(False, exc)] * len(batch)
        for queued, (ok, value) in zip(batch, outcomes, strict=True):
            if queued.future.done():
                continue
            if ok:
                queued.future.set_result(value)
            else:
                queued.future.set_exception(value)

    def _connection(self) -> Connection:
        if self._conn is None or self._conn.closed:
            self._conn = self._engine.connect()
        return self._conn

    def _close_conn(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        self._engine.dispose()
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    @contextlib.contextmanager
    def _exclusive(self, jobs: int) -> Iterator[None]:
        """Hold the cross-process write lock (in the writer thread: blocking is fine)."""
        asked = time.perf_counter()
        fd = self._lock_file()
        if fd is not None:
            fcntl.flock(fd, fcntl.LOCK_EX)
        got = time.perf_counter()
        try:
            yield
        finally:
            if fd is not None:
                fcntl.flock(fd, fcntl.LOCK_UN)
            self.stats.add(jobs, waited=got - asked, held=time.perf_counter() - got)

    def _lock_file(self) -> int | None:
        if self._lock_fd is None and self._lock_path is not None:
            self._lock_fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        return self._lock_fd

    def _run_batch(self, batch: list[_Queued]) -> list[tuple[bool, Any]]:
        """All jobs in one transaction; if one raises, each job reruns in its own.

        Jobs are pure database work, so rerunning them after a rollback is safe; the
        common case pays one BEGIN/COMMIT for the whole batch and no SAVEPOINTs.
        """
        conn = self._connection()
        with self._exclusive(len(batch)):
            try:
                with conn.begin():
                    return [(True, queued.job(conn)) for queued in batch]
            except Exception as exc:
                if len(batch) == 1:
                    return [(False, exc)]
            outcomes: list[tuple[bool, Any]] = []
            for queued in batch:
                # The outcome is known only once the commit returned: a commit that fails
                # (the disk is full) fails the job that had run.
                try:
                    with conn.begin():
                        value = queued.job(conn)
                except Exception as exc:
                    outcomes.append((False, exc))
                else:
                    outcomes.append((True, value))
            return outcomes


def _fail(batch: list[_Queued], error: StoreError) -> None:
    for queued in batch:
        if not queued.future.done():
            queued.future.set_exception(error)
