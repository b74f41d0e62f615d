"""What a failed store operation means: no space left, lost for good, or unavailable.

Driver errors are read by their codes (SQLite's result code, PostgreSQL's SQLSTATE, the
errno), never by their text, through whatever SQLAlchemy or the driver wrapped them in.
Errors that are the caller's own (a constraint, a bad value) are not faults: they keep
their SQLAlchemy classes.
"""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from sqlalchemy.exc import DisconnectionError, InterfaceError, OperationalError

from core.errors import FamiliarError

__all__ = ["Fault", "classify", "first_line", "free_bytes", "lost_cause"]

FaultKind = Literal["full", "lost", "unavailable"]

_SQLITE_CORRUPT = 11
_SQLITE_FULL = 13
_SQLITE_NOTADB = 26
_SQLITE_READONLY_DBMOVED = 1032
_PG_FULL = "53100"
_PG_LOST = {
    "3D000": "does not exist (it was dropped or renamed)",
    "57P04": "was dropped",
    "42P01": "has lost its schema (a table is missing: was the database dropped or emptied?)",
    "XX001": "is corrupted (PostgreSQL reports data_corrupted)",
    "XX002": "is corrupted (PostgreSQL reports index_corrupted)",
}
_UNAVAILABLE = (OperationalError, InterfaceError, DisconnectionError, OSError)
_DEPTH = 6


@dataclass(frozen=True, slots=True)
class Fault:
    """What a failure means for the store.

    Attributes:
        kind: ``full`` (no space for a write), ``lost`` (corrupted, deleted, dropped:
            never recovers by itself) or ``unavailable`` (anything else the database or
            the connection to it failed with).
        cause: one line, to follow the file or URL ("is corrupted (...)").
    """

    kind: FaultKind
    cause: str


def classify(exc: BaseException) -> Fault | None:
    """The fault ``exc`` means; None when it is not the store's fault (a constraint, a bad
    value, a bug) or is already one of our own errors."""
    if isinstance(exc, FamiliarError):
        return None
    sqlite_code, sqlstate, os_errno = _codes(exc)
    text = first_line(exc)
    if sqlite_code is not None:
        primary = sqlite_code & 0xFF
        if primary == _SQLITE_FULL:
            return Fault("full", f"the disk is full ({text})")
        if primary == _SQLITE_CORRUPT:
            return Fault("lost", f"is corrupted ({text})")
        if primary == _SQLITE_NOTADB:
            return Fault("lost", f"is not an SQLite database any more ({text})")
        if sqlite_code == _SQLITE_READONLY_DBMOVED:
            return Fault("lost", f"was moved or deleted while open ({text})")
    if sqlstate == _PG_FULL:
        return Fault("full", f"the database server's disk is full ({text})")
    if sqlstate is not None and sqlstate in _PG_LOST:
        return Fault("lost", _PG_LOST[sqlstate])
    if os_errno == errno.ENOSPC:
        return Fault("full", f"the disk is full ({text})")
    if isinstance(exc, _UNAVAILABLE) or (sqlstate is not None and sqlstate.startswith("08")):
        return Fault("unavailable", text)
    return None


def lost_cause(exc: BaseException) -> str | None:
    """Why ``exc`` means the store is lost for good (None when it does not)."""
    fault = classify(exc)
    return fault.cause if fault is not None and fault.kind == "lost" else None


def first_line(exc: BaseException) -> str:
    """The driver's own message of ``exc``, one line (SQLAlchemy's wrapping left out)."""
    inner = getattr(exc, "orig", None) or exc
    lines = str(inner).strip().splitlines()
    return lines[0] if lines else type(inner).__name__


def free_bytes(directory: Path) -> int:
    """Bytes this process may still write under ``directory`` (root may use the blocks a
    filesystem reserves for it). Blocking."""
    st = os.statvfs(directory)
    blocks = st.f_bfree if os.geteuid() == 0 else st.f_bavail
    return blocks * st.f_frsize


def _codes(exc: BaseException) -> tuple[int | None, str | None, int | None]:
    """SQLite's (extended) result code, the SQLSTATE and the errno, from ``exc`` or the
    errors it wraps (SQLAlchemy's ``orig``, then ``__cause__``/``__context__``)."""
    sqlite_code: int | None = None
    sqlstate: str | None = None
    os_errno: int | None = None
    current: BaseException | None = exc
    for _ in range(_DEPTH):
        if current is None:
            break
        code = getattr(current, "sqlite_errorcode", None)
        if sqlite_code is None and isinstance(code, int):
            sqlite_code = code
        state = getattr(current, "sqlstate", None)
        if sqlstate is None and isinstance(state, str):
            sqlstate = state
        if os_errno is None and isinstance(current, OSError):
            os_errno = current.errno
        inner = getattr(current, "orig", None)
        if isinstance(inner, BaseException) and inner is not current:
            current = inner
        else:
            current = current.__cause__ or current.__context__
    return sqlite_code, sqlstate, os_errno
