"""Shared fixtures: a real Store on SQLite and on PostgreSQL (when reachable)."""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import asyncpg
import pytest

from core.store.engine import Store

PG_HOST = os.environ.get("FAMILIAR_TEST_PG_HOST", "127.0.0.1")
PG_PORT = int(os.environ.get("FAMILIAR_TEST_PG_PORT", "5432"))
PG_ADMIN_DB = os.environ.get("FAMILIAR_TEST_PG_DB", "test")
PG_USER = os.environ.get("FAMILIAR_TEST_PG_USER", "postgres")


async def _admin() -> asyncpg.Connection:
    return await asyncio.wait_for(
        asyncpg.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, database=PG_ADMIN_DB), 3
    )


@asynccontextmanager
async def fresh_pg_database() -> AsyncIterator[str]:
    """A new, empty PostgreSQL database for one test; skips (or fails in CI) without PG."""
    try:
        admin = await _admin()
    except (OSError, asyncpg.PostgresError, TimeoutError) as exc:
        reason = f"PostgreSQL not reachable on {PG_HOST}:{PG_PORT} ({exc!r})"
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true requires PostgreSQL: {reason}")
        pytest.skip(reason)
    name = f"familiar_t_{uuid.uuid4().hex[:12]}"
    await admin.execute(f'CREATE DATABASE "{name}"')
    await admin.close()
    try:
        yield f"postgresql+asyncpg://{PG_USER}@{PG_HOST}:{PG_PORT}/{name}"
    finally:
        admin = await _admin()
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


@pytest.fixture(autouse=True)
def no_terminal_size(monkeypatch: pytest.MonkeyPatch) -> None:
    # pytest-xdist's workers export COLUMNS=80 and LINES=24; without them every test sees
    # the environment of `make test` from a plain shell, whether or not xdist runs it.
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.delenv("LINES", raising=False)


@pytest.fixture
async def pg_url() -> AsyncIterator[str]:
    async with fresh_pg_database() as url:
        yield url


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    """Store-backed tests run on SQLite and on PostgreSQL."""
    if request.param == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path / 'familiar.db'}"
        return
    async with fresh_pg_database() as url:
        yield url


@pytest.fixture
async def store(store_url: str) -> AsyncIterator[Store]:
    s = Store(url=store_url)
    await s.open()
    try:
        yield s
    finally:
        await s.close()


@pytest.fixture
def restore_root_logging() -> Iterator[None]:
    """For tests that run ``gateway.daemon.serve``: it installs its own root handler (as
    the daemon must); this puts pytest's handlers back afterwards."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    for handler in list(root.handlers):
        root.removeHandler(handler)
    for handler in handlers:
        root.addHandler(handler)
    root.setLevel(level)


def short_home() -> Path:
    """A fresh home directory whose ``run/gateway.sock`` fits a Unix socket address."""
    return Path(tempfile.mkdtemp(prefix="fam-", dir="/tmp"))


@pytest.fixture
def daemon_home() -> Iterator[Path]:
    """A `short_home`, removed afterwards."""
    path = short_home()
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
