"""Is the store still the one we opened, and sound? (`StoreHealth`)

SQLite keeps writing into a database file that was deleted or replaced while it is
open (the open descriptor outlives the name), so nothing fails until the next start
finds an empty database. `SqliteHealth` records the file's identity at open and
compares it on every check; `quick_check` reads every page (at start and in
``familiar doctor``, not on every probe). On a database server health is a
``SELECT 1`` round trip.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine

from core.store.faults import first_line, lost_cause
from core.store.migrate import VERSION_TABLE, head_revision
from core.store.sqlite_file import FileIdentity, file_identity, header_problem, quick_check

__all__ = ["HealthStatus", "ServerHealth", "SqliteHealth", "StoreHealth"]

_PING_TIMEOUT = 5.0
_REVISION = text(f"SELECT version_num FROM {VERSION_TABLE}")


@dataclass(frozen=True, slots=True)
class HealthStatus:
    """One check's verdict.

    Attributes:
        ok: the store can be used.
        detail: what was checked (when ok) or what is wrong (one line).
        fatal: the store can never recover by itself (its file is gone or replaced):
            carrying on would write into a file nobody will read again.
    """

    ok: bool
    detail: str
    fatal: bool = False

    def as_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "detail": self.detail, "fatal": self.fatal}


class StoreHealth(Protocol):
    """Checks on an open store."""

    async def check(self) -> HealthStatus:
        """A cheap check, fit for every readiness probe."""
        ...

    async def quick_check(self) -> HealthStatus:
        """A thorough check (reads the whole database on SQLite)."""
        ...


class SqliteHealth:
    """Health of an SQLite file: same file as at open, and (on demand) sound pages."""

    def __init__(self, *, path: Path, identity: FileIdentity) -> None:
        self.path = path
        self.identity = identity
        # Opened once, before SQLite opens the file, and closed after it (`close`): see
        # `header_problem` on why the header is never read through a fresh descriptor.
        self._fd: int | None = None
        with contextlib.suppress(OSError):  # gone already: the identity check says so
            self._fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)

    def close(self) -> None:
        """Once every SQLite connection of this process to the file is closed."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def check_identity(self) -> HealthStatus:
        """Blocking ``stat``: is the file at ``path`` still the one opened?"""
        try:
            now = file_identity(self.path)
        except FileNotFoundError:
            return HealthStatus(False, f"{self.path} was deleted while open", fatal=True)
        except OSError as exc:
            return HealthStatus(False, f"{self.path} cannot be checked: {exc.strerror}")
        if now != self.identity:
            return HealthStatus(False, f"{self.path} was replaced by another file", fatal=True)
        try:
            problem = header_problem(self._fd) if self._fd is not None else None
        except OSError as exc:
            return HealthStatus(False, f"{self.path} cannot be read: {exc.strerror}")
        if problem is not None:
            return HealthStatus(False, f"{self.path} {problem}", fatal=True)
        return HealthStatus(True, f"{self.path} in place")

    async def check(self) -> HealthStatus:
        return await asyncio.to_thread(self.check_identity)

    async def quick_check(self) -> HealthStatus:
        status = await self.check()
        if not status.ok:
            return status
        problem = await asyncio.to_thread(quick_check, self.path, read_only=True)
        if problem is not None:
            return HealthStatus(False, f"{self.path} {problem}")
        return HealthStatus(True, f"{self.path} in place, quick_check ok")


class ServerHealth:
    """Health of a database server: one round trip reading the schema's revision.

    A database that is gone, or whose schema is (dropped and created again empty), is
    fatal; one unreachable, or at another revision (a newer gateway migrated it), is not
    ready.
    """

    def __init__(self, *, engine: AsyncEngine) -> None:
        self._engine = engine
        self._where = engine.url.render_as_string(hide_password=True)

    async def check(self) -> HealthStatus:
        try:
            async with asyncio.timeout(_PING_TIMEOUT), self._engine.connect() as conn:
                revision = (await conn.execute(_REVISION)).scalar()
        except TimeoutError:
            return HealthStatus(False, f"no answer within {_PING_TIMEOUT:g}s")
        except (SQLAlchemyError, OSError) as exc:
            lost = lost_cause(exc)
            if lost is not None:
                return HealthStatus(False, f"the database {self._where} {lost}", fatal=True)
            return HealthStatus(False, f"unreachable: {first_line(exc)}")
        if revision != head_revision():
            return HealthStatus(False, f"schema at revision {revision}, expected {head_revision()}")
        return HealthStatus(True, f"schema at revision {revision}")

    async def quick_check(self) -> HealthStatus:
        return await self.check()
