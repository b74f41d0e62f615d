"""Store faults on real stores: a full disk, corrupted pages and header, a dropped database.

The faults are real: a tmpfs of a few MiB filled up (root only; skipped where mounting
is not permitted), bytes overwritten in the database file, a PostgreSQL database dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import sqlite3
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import asyncpg
import pytest
from sqlalchemy import Connection, text
from sqlalchemy.exc import IntegrityError

from core.errors import StoreError, StoreFull, StoreLost
from core.store.condition import ROOM_AGAIN
from core.store.engine import Store
from core.store.faults import classify
from tests.conftest import PG_ADMIN_DB, PG_HOST, PG_PORT, PG_USER, fresh_pg_database
from tests.small_disk import fill, small_disk


@pytest.fixture
def disk() -> Iterator[Path]:
    with small_disk(4) as path:
        yield path


@pytest.fixture
async def small_store(disk: Path) -> AsyncIterator[Store]:
    store = Store(url=f"sqlite+aiosqlite:///{disk / 'familiar.db'}")
    await store.open()
    await store.transact(_create_table)
    try:
        yield store
    finally:
        await store.close()


def _create_table(conn: Connection) -> None:
    conn.exec_driver_sql("CREATE TABLE IF NOT EXISTS t (v TEXT)")


def _insert(conn: Connection) -> None:
    conn.exec_driver_sql("INSERT INTO t VALUES (?)", ("x" * 3000,))


async def _count(store: Store) -> int:
    async with store.read() as conn:
        return int((await conn.execute(text("SELECT count(*) FROM t"))).scalar_one())


# -- classifying real driver errors ------------------------------------------------------


def test_sqlite_full_corrupt_and_not_a_database_are_classified_by_code(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE t (v TEXT)")
        conn.executemany("INSERT INTO t VALUES (?)", [("y" * 3000,)] * 50)
        conn.commit()
        conn.execute("PRAGMA max_page_count = 60")
        with pytest.raises(sqlite3.OperationalError) as full:
            conn.executemany("INSERT INTO t VALUES (?)", [("y" * 3000,)] * 50)
    fault = classify(full.value)
    assert fault is not None and fault.kind == "full", fault

    with db.open("r+b") as f:  # pages in the middle: the table's data
        f.seek(8192)
        f.write(os.urandom(16384))
    with pytest.raises(sqlite3.DatabaseError) as corrupt, sqlite3.connect(db) as conn:
        conn.execute("SELECT count(*), max(v) FROM t").fetchall()
    fault = classify(corrupt.value)
    assert fault is not None and fault.kind == "lost" and "is corrupted" in fault.cause, fault

    with db.open("r+b") as f:
        f.write(b"not a database!!")
    with pytest.raises(sqlite3.DatabaseError) as notadb, sqlite3.connect(db) as conn:
        conn.execute("SELECT * FROM t").fetchall()
    fault = classify(notadb.value)
    assert fault is not None and fault.kind == "lost", fault
    assert "not an SQLite database" in fault.cause


async def test_a_constraint_is_the_callers_error_and_keeps_its_class(store: Store) -> None:
    def twice(conn: Connection) -> None:
        conn.exec_driver_sql("CREATE TABLE IF NOT EXISTS u (k TEXT PRIMARY KEY)")
        conn.exec_driver_sql("INSERT INTO u VALUES ('a')")
        conn.exec_driver_sql("INSERT INTO u VALUES ('a')")

    with pytest.raises(IntegrityError):
        await store.transact(twice)
    assert store.condition.full is None and store.condition.lost is None
    assert classify(OSError(errno.ENOSPC, "No space left on device")) is not None


# -- a full disk -------------------------------------------------------------------------


async def test_writes_on_a_full_disk_fail_at_once_and_work_again_once_there_is_room(
    disk: Path, small_store: Store
) -> None:
    store = small_store
    assert (await store.health.check()).ok
    filler = await asyncio.to_thread(fill, disk)
    before = await _count(store)

    async def attempt() -> bool:
        try:
            await store.transact(_insert)
        except StoreFull:
            return False
        return True

    # Many at once: the writer commits them in batches, and a batch whose commit fails
    # is rerun job by job. A job may only be reported done if its commit went through.
    async with asyncio.timeout(30):
        outcomes = [
            o for _ in range(4) for o in await asyncio.gather(*(attempt() for _ in range(60)))
        ]
    stored = await _count(store) - before
    assert outcomes.count(True) == stored, (outcomes.count(True), stored)
    assert outcomes.count(False) > 0
    status = await store.health.check()
    assert not status.ok and not status.fatal
    assert "no space left for the database" in status.detail
    assert str(disk / "familiar.db") in status.detail

    filler.unlink()
    status = await store.health.check()
    assert status.ok, status  # the free space ended the full state
    await store.transact(_insert)  # the writer survived
    assert await _count(store) == before + stored + 1


async def test_a_disk_that_fills_up_is_reported_before_a_write_fails(
    disk: Path, small_store: Store
) -> None:
    filler = await asyncio.to_thread(fill, disk)
    status = await small_store.health.check()
    assert not status.ok and "its disk has 0 KiB free" in status.detail, status
    # Just a little room is not enough to call it recovered.
    with filler.open("r+b") as f:
        f.truncate(filler.stat().st_size - ROOM_AGAIN // 2)
    assert not (await small_store.health.check()).ok
    filler.unlink()
    assert (await small_store.health.check()).ok


# -- a damaged file ----------------------------------------------------------------------


@pytest.fixture
async def sqlite_store(tmp_path: Path) -> AsyncIterator[Store]:
    """A store whose rows are all in the database file (none in its write-ahead log)."""
    path = tmp_path / "familiar.db"
    store = Store(url=f"sqlite+aiosqlite:///{path}")
    await store.open()
    await store.close()
    await asyncio.to_thread(_add_rows, path)
    await store.open()
    try:
        yield store
    finally:
        await store.close()


def _add_rows(path: Path) -> None:
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute("CREATE TABLE t (v TEXT)")
        conn.executemany("INSERT INTO t VALUES (?)", [("x" * 3000,)] * 120)
        conn.commit()
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")


async def test_a_statement_that_meets_corrupted_pages_marks_the_store_lost(
    sqlite_store: Store,
) -> None:
    store = sqlite_store
    lost: list[str] = []
    store.condition.on_lost(lost.append)
    assert store.path is not None
    with store.path.open("r+b") as f:  # pages of table t: the last ones written
        f.seek(store.path.stat().st_size - 4096 * 40)
        f.write(os.urandom(4096 * 8))
    await store.engine.dispose()  # new read connections: no page cached from before
    with pytest.raises(StoreLost, match="is corrupted"):
        async with store.read() as conn:
            await conn.execute(text("SELECT count(*), max(v) FROM t"))
    assert len(lost) == 1 and str(store.path) in lost[0]
    status = await store.health.check()
    assert status.fatal and status.detail == lost[0]


async def test_an_overwritten_header_is_fatal_on_the_next_check(sqlite_store: Store) -> None:
    store = sqlite_store
    assert (await store.health.check()).ok
    assert store.path is not None
    with store.path.open("r+b") as f:
        f.write(os.urandom(100))
    status = await store.health.check()
    assert status.fatal, status
    assert (
        status.detail
        == f"{store.path} is not an SQLite database any more (its header was overwritten)"
    )
    assert store.condition.lost == status.detail


# -- PostgreSQL --------------------------------------------------------------------------


async def _admin() -> asyncpg.Connection:
    return await asyncpg.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, database=PG_ADMIN_DB)


@pytest.mark.postgres
async def test_postgresql_readiness_reads_the_schema_revision_and_a_dropped_schema_is_fatal() -> (
    None
):
    async with fresh_pg_database() as url:
        store = Store(url=url)
        await store.open()
        try:
            status = await store.health.check()
            assert status.ok and status.detail.startswith("schema at revision "), status
            await store.transact(lambda conn: conn.exec_driver_sql("DROP TABLE alembic_version"))
            status = await store.health.check()
            assert status.fatal and "has lost its schema" in status.detail, status
        finally:
            await store.close()


@pytest.mark.postgres
async def test_a_dropped_postgresql_database_is_lost_not_a_driver_error() -> None:
    async with fresh_pg_database() as url:
        name = url.rsplit("/", 1)[1]
        store = Store(url=url)
        await store.open()
        try:
            admin = await _admin()
            try:
                await admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
            finally:
                await admin.close()
            error: StoreError | None = None
            for _ in range(3):  # the first use may meet the connection the drop ended
                try:
                    async with store.read() as conn:
                        await conn.execute(text("SELECT 1 FROM inbound LIMIT 1"))
                except StoreError as exc:
                    error = exc
                    if isinstance(exc, StoreLost):
                        break
            assert isinstance(error, StoreLost), error
            assert f"{name} does not exist" in str(error)
            assert store.condition.lost == str(error)
        finally:
            await store.close()


async def test_the_header_check_keeps_sqlites_locks(tmp_path: Path) -> None:
    """Closing any descriptor of a file drops every POSIX lock the process holds on it:
    a header check that opened and closed the file let another process, closing the
    last connection it knew of, checkpoint and delete the log under our feet."""
    path = tmp_path / "familiar.db"
    store = Store(url=f"sqlite+aiosqlite:///{path}")
    await store.open()
    try:
        await store.transact(_create_table)
        await store.transact(_insert)
        for _ in range(3):
            assert (await store.health.check()).ok
        other = await asyncio.create_subprocess_exec(
            sys.executable, "-c",
            f"import sqlite3; c = sqlite3.connect({str(path)!r}); "
            "c.execute('SELECT count(*) FROM t').fetchall(); c.close()",
        )  # fmt: skip
        assert await other.wait() == 0
        assert path.with_name("familiar.db-wal").exists()  # still ours: we hold our lock
        await store.transact(_insert)
        assert await _count(store) == 2
    finally:
        await store.close()
