"""The SQLite file before the store uses it: created private, named in every failure."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.exc import OperationalError

from core.errors import StoreFileError
from core.store.health import SqliteHealth
from core.store.sqlite_file import no_create_url, prepare_sqlite_file, quick_check, sqlite_path


def test_created_private_whatever_the_umask(tmp_path: Path) -> None:
    db = tmp_path / "familiar.db"
    old = os.umask(0)
    try:
        prepare_sqlite_file(db)
    finally:
        os.umask(old)
    assert stat.S_IMODE(db.stat().st_mode) == 0o600
    assert quick_check(db) is None


def test_an_orphaned_write_ahead_log_refuses_a_fresh_start(tmp_path: Path) -> None:
    db = tmp_path / "familiar.db"
    (tmp_path / "familiar.db-wal").write_bytes(b"left behind")
    with pytest.raises(StoreFileError) as caught:
        prepare_sqlite_file(db)
    assert str(db) in str(caught.value) and "familiar.db-wal" in str(caught.value)
    assert "\n" not in str(caught.value)
    assert not db.exists()


def test_engines_never_create_the_file(tmp_path: Path) -> None:
    db = tmp_path / "a b%c" / "familiar.db"
    db.parent.mkdir()
    url = f"sqlite:///{db}"
    assert sqlite_path(url) == db
    identity = prepare_sqlite_file(db)
    engine = create_engine(no_create_url(url, db))
    try:
        with engine.connect() as conn:
            assert conn.execute(text("SELECT 1")).scalar() == 1
        engine.dispose()
        assert SqliteHealth(path=db, identity=identity).check_identity().ok
        db.unlink()
        status = SqliteHealth(path=db, identity=identity).check_identity()
        assert not status.ok and status.fatal and "deleted" in status.detail
        with pytest.raises(OperationalError), engine.connect():
            pass
        assert not db.exists()
    finally:
        engine.dispose()


def test_in_memory_and_server_urls_have_no_file() -> None:
    assert sqlite_path("sqlite+aiosqlite:///:memory:") is None
    assert sqlite_path("sqlite+aiosqlite://") is None
    assert sqlite_path("postgresql+asyncpg://u@h/db") is None
