"""A consistent online copy of the SQLite database (SQLite's backup API).

The copy is read over its own read-only connection in one step, so it is one
snapshot even while the gateway writes (WAL lets the writer go on). It is written
to a private temporary file beside the target, made self-contained (rollback
journal instead of WAL), checked with ``quick_check``, and only then put in place.
"""

from __future__ import annotations

import os
import sqlite3
from contextlib import closing, suppress
from dataclasses import dataclass
from pathlib import Path

from core.errors import StoreError, StoreFileError
from core.private_files import create_private_file
from core.store.sqlite_file import quick_check

__all__ = ["COUNTED_TABLES", "BackupResult", "backup_sqlite"]

COUNTED_TABLES = ("sessions", "history", "events", "schedules", "inbound", "outbound")
"""Tables whose row counts a backup reports."""


@dataclass(frozen=True)
class BackupResult:
    """What a backup wrote.

    Attributes:
        path: the copy.
        size: its size in bytes.
        rows: row counts of `COUNTED_TABLES` (those that exist).
    """

    path: Path
    size: int
    rows: dict[str, int]


def backup_sqlite(source: Path, target: Path, *, force: bool = False) -> BackupResult:
    """Copy the database ``source`` to ``target`` (mode 0600). Blocking: use a thread.

    Args:
        source: the live database file.
        target: where the copy goes; an existing file is replaced only with ``force``.
        force: replace an existing ``target``.

    Raises:
        StoreFileError: ``source`` cannot be read or is damaged.
        StoreError: ``target`` exists (without ``force``) or cannot be written.
    """
    if target.is_dir():
        raise StoreError(f"{target} is a directory: give the path of the file to write")
    if target.exists() and not force:
        raise StoreError(f"{target} exists: pass --force to replace it")
    if not source.is_file():
        raise StoreFileError(str(source), "does not exist", hint="check --home and store.url")
    temp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        create_private_file(temp)
        rows = _copy(source, temp)
        problem = quick_check(temp, read_only=True)
        if problem is not None:
            raise StoreFileError(str(source), f"gave a copy that {problem}")
        _put_in_place(temp, target, force=force)
    except OSError as exc:
        raise StoreError(f"cannot write {target}: {exc.strerror or exc}") from exc
    finally:
        with suppress(FileNotFoundError):
            temp.unlink()
    return BackupResult(path=target, size=target.stat().st_size, rows=rows)


def _copy(source: Path, temp: Path) -> dict[str, int]:
    uri = f"{source.absolute().as_uri()}?mode=ro"
    try:
        with (
            closing(sqlite3.connect(uri, uri=True, timeout=10.0)) as src,
            closing(sqlite3.connect(temp)) as dst,
        ):
            src.backup(dst)
            dst.execute("PRAGMA journal_mode=DELETE")  # one self-contained file
            return _counts(dst)
    except sqlite3.Error as exc:
        raise StoreFileError(str(source), f"cannot be copied ({exc})") from exc


def _counts(conn: sqlite3.Connection) -> dict[str, int]:
    present = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    counts: dict[str, int] = {}
    for table in COUNTED_TABLES:
        if table in present:
            counts[table] = int(conn.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0])
    return counts


def _put_in_place(temp: Path, target: Path, *, force: bool) -> None:
    if force:
        os.replace(temp, target)
        return
    try:
        os.link(temp, target)  # atomic "create, never overwrite"
    except FileExistsError:
        raise StoreError(f"{target} exists: pass --force to replace it") from None
