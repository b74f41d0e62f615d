"""The SQLite database file: where it is, made private, checked before it is used.

Every way the file can be unusable at start (its folder missing, a folder in its place,
not a database, corrupted pages) becomes one `StoreFileError` naming the file, the
cause and a hint, instead of a driver traceback. The file is created 0600 before
SQLite opens it; SQLite gives its ``-wal`` and ``-shm`` files the database file's own
permissions (it ``fchmod``s them past the umask), so they are private too.
"""

from __future__ import annotations

import logging
import os
import sqlite3
from contextlib import closing
from pathlib import Path
from urllib.parse import quote

from sqlalchemy.engine import URL, make_url

from core.errors import StoreFileError
from core.private_files import create_private_file, tighten

__all__ = [
    "FileIdentity",
    "file_identity",
    "header_problem",
    "no_create_url",
    "prepare_sqlite_file",
    "quick_check",
    "sqlite_path",
]

log = logging.getLogger(__name__)

FileIdentity = tuple[int, int]
"""``(st_dev, st_ino)``: the same pair means the same file."""

_MAGIC = b"SQLite format 3\0"
_MAX_PROBLEMS_SHOWN = 1
_NOT_A_DATABASE = ("file is not a database", "file is encrypted")


def sqlite_path(url: str) -> Path | None:
    """The database file of an SQLite URL; None for other databases and in-memory ones."""
    parsed = make_url(url)
    database = parsed.database
    if parsed.get_backend_name() != "sqlite" or not database or database == ":memory:":
        return None
    if database.startswith("file:") or parsed.query.get("mode") == "memory":
        return None  # URI filenames: leave them to SQLite
    return Path(database).absolute()


def no_create_url(url: str, path: Path) -> URL:
    """``url`` opening ``path`` as an SQLite URI with ``mode=rw``: never creates the file.

    `prepare_sqlite_file` creates it (privately) at open; after that, a connection
    made once the file was deleted fails instead of starting an empty database.
    """
    parsed = make_url(url)
    query = {**parsed.query, "mode": "rw", "uri": "true"}
    return parsed.set(database=f"file:{quote(str(path))}", query=query)


def file_identity(path: Path) -> FileIdentity:
    """The file's ``(st_dev, st_ino)``. Raises OSError (FileNotFoundError) if missing."""
    st = path.stat()
    return (st.st_dev, st.st_ino)


def header_problem(fd: int) -> str | None:
    """What is wrong with the first 16 bytes of the file open as ``fd`` (None when they
    are SQLite's).

    One small read, cheap enough for every readiness probe: a file overwritten from its
    start is caught here before any statement reads the damage. An empty file is fine
    (in WAL mode a new database may not have reached its file yet). ``fd`` stays open
    for as long as SQLite has the file open in this process: closing any descriptor of
    a file drops every POSIX lock the process holds on it, SQLite's locks included.
    Blocking.
    """
    head = os.pread(fd, len(_MAGIC), 0)
    if not head or head == _MAGIC:
        return None
    return "is not an SQLite database any more (its header was overwritten)"


def prepare_sqlite_file(path: Path) -> FileIdentity:
    """Make sure ``path`` can serve as the database, privately; return its identity.

    Creates the file (0600) if missing, tightens it and its ``-wal``/``-shm``, then
    runs ``PRAGMA quick_check``. Blocking: call it from a thread.

    Raises:
        StoreFileError: the file cannot be used (one line: file, cause, hint).
    """
    where = str(path)
    parent = path.parent
    if not parent.is_dir():
        what = "is not a directory" if parent.exists() else "does not exist"
        raise StoreFileError(
            where,
            f"cannot be created: its directory {parent} {what}",
            hint="create the directory or set store.url",
        )
    if path.is_dir():
        raise StoreFileError(where, "is a directory, not a database file")
    wal = path.with_name(path.name + "-wal")
    if not path.exists() and wal.exists():
        # SQLite would replay the orphaned log into a new, empty file.
        raise StoreFileError(
            where,
            f"is missing but its write-ahead log {wal.name} is there (it was deleted or moved)",
            hint=f"restore it from a backup and delete {wal.name} and {path.name}-shm, "
            "or move them away to start empty",
        )
    if not os.access(parent, os.W_OK | os.X_OK):
        raise StoreFileError(
            where,
            f"cannot be used: its directory {parent} is not writable "
            "(SQLite keeps its -wal and -shm files beside it)",
            hint="fix the directory's owner or permissions",
        )
    try:
        if create_private_file(path):
            log.info("created a new, empty database %s", path)
        for companion in (wal, path.with_name(path.name + "-shm")):
            tighten(companion)
        identity = file_identity(path)
    except OSError as exc:
        raise StoreFileError(
            where, f"cannot be opened: {exc.strerror or exc}", hint="check its permissions"
        ) from exc
    problem = quick_check(path)
    if problem is not None:
        raise StoreFileError(where, problem)
    return identity


def quick_check(path: Path, *, read_only: bool = False) -> str | None:
    """Run ``PRAGMA quick_check`` on ``path`` over its own connection.

    Blocking: call it from a thread.

    Args:
        path: the database file.
        read_only: open it read-only (doctor, backups): never creates or changes it.

    Returns:
        None when the database is sound, else what is wrong, as one line starting with
        a verb ("is corrupted: ...", "is not an SQLite database ...").
    """
    uri = f"{path.absolute().as_uri()}?mode={'ro' if read_only else 'rw'}"
    try:
        with closing(sqlite3.connect(uri, uri=True, timeout=5.0)) as conn:
            rows = [str(row[0]) for row in conn.execute("PRAGMA quick_check")]
    except sqlite3.DatabaseError as exc:
        return _describe(exc)
    if rows == ["ok"]:
        return None
    problems = [line for row in rows for line in row.splitlines() if not line.startswith("***")]
    shown = "; ".join(problems[:_MAX_PROBLEMS_SHOWN])
    more = len(problems) - _MAX_PROBLEMS_SHOWN
    return f"is corrupted: quick_check found {shown}" + (f" and {more} more" if more > 0 else "")


def _describe(exc: sqlite3.DatabaseError) -> str:
    text = str(exc)
    if any(marker in text for marker in _NOT_A_DATABASE):
        return f"is not an SQLite database ({text})"
    if "malformed" in text:
        return f"is corrupted ({text})"
    if isinstance(exc, sqlite3.OperationalError):
        return f"cannot be opened ({text})"
    return f"cannot be read ({text})"
