"""This process's view of the store: out of space, or lost for good (`StoreCondition`).

Every failure of a store operation passes through `StoreCondition.failed`, which turns
the faults (`core.store.faults`) into our errors and remembers them:

- **No space left** (`StoreFull`): the write failed and nothing of it was stored, so the
  caller gets a clear error at once (a message is refused, never half-accepted). The
  store is reported full (not ready, with the reason) until there is room again: on
  SQLite, until the file's disk has `ROOM_AGAIN` free (checked with every health check,
  which also reports a disk with less than `FULL_BELOW` free before any write fails); on
  a server, until a write commits. While it is, new messages are refused before they
  are tried (`refuse_new`, on SQLite), so a refusal does not depend on whether a write
  still fits in room SQLite keeps in its log.
- **Lost** (`StoreLost`: corrupted, deleted, dropped): the listeners are told once, and
  the gateway stops; retrying could only write into a store nobody will read.

`ConditionHealth` puts both in front of the store's own checks (`core.store.health`), so
``/readyz``, ``familiar status`` and the store watch see them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

from core.errors import StoreError, StoreFull, StoreLost
from core.store.faults import classify, free_bytes
from core.store.health import HealthStatus, StoreHealth

__all__ = ["FULL_BELOW", "ROOM_AGAIN", "ConditionHealth", "StoreCondition"]

log = logging.getLogger(__name__)

FULL_BELOW = 64 * 1024
"""A disk with less free than this is full (SQLite writes its log in pages of 4 KiB)."""
ROOM_AGAIN = 1024 * 1024
"""Free bytes that end a full disk (more than `FULL_BELOW`: no flapping at the edge)."""


class StoreCondition:
    """Out of space or lost, as this process saw it.

    Args:
        where: the database file, or the server's URL without its password.
        directory: the folder of an SQLite file (its free space is checked); None on a
            database server.
    """

    def __init__(self, *, where: str, directory: Path | None) -> None:
        self.where = where
        self._directory = directory
        self.full: str | None = None
        """Why writes fail for lack of space (None while they do not)."""
        self.lost: str | None = None
        """Why the store is lost for good (None while it is not)."""
        self._on_lost: list[Callable[[str], None]] = []

    def on_lost(self, callback: Callable[[str], None]) -> None:
        """Call ``callback(reason)`` once when the store is lost (at once if it is)."""
        self._on_lost.append(callback)
        if self.lost is not None:
            callback(self.lost)

    def failed(self, exc: BaseException) -> StoreError | None:
        """The error ``exc`` means for the caller; None when it is not a store fault
        (raise ``exc`` itself)."""
        fault = classify(exc)
        if fault is None:
            return None
        if fault.kind == "full":
            message = (
                f"no space left for the database {self.where}: {fault.cause}; "
                "new messages are refused until there is room"
            )
            self._set_full(message)
            return StoreFull(message)
        if fault.kind == "lost":
            message = f"the database {self.where} {fault.cause}"
            self.mark_lost(message)
            return StoreLost(message)
        return StoreError(f"the database {self.where} is unavailable: {fault.cause}")

    @contextlib.contextmanager
    def guard(self) -> Iterator[None]:
        """Raise store faults inside as our errors (from the driver's)."""
        try:
            yield
        except Exception as exc:
            error = self.failed(exc)
            if error is None:
                raise
            raise error from exc

    def mark_lost(self, reason: str) -> None:
        """The store is lost for good: tell the listeners (once)."""
        if self.lost is not None:
            return
        self.lost = reason
        for callback in self._on_lost:
            callback(reason)

    def refuse_new(self) -> None:
        """Refuse something new (a message) while the disk is known to be full.

        Raises:
            StoreFull: on SQLite, until its disk has room again. A write might still
                fit in room SQLite keeps in its log, but what is left is for the work
                already accepted (replies); on a server only the write can tell.
        """
        if self.full is not None and self._directory is not None:
            raise StoreFull(self.full)

    def wrote(self) -> None:
        """A write committed. On a server, that is the sign there is room again."""
        if self.full is not None and self._directory is None:
            self._set_room()

    async def check_space(self) -> None:
        """On SQLite: note a disk that filled up, or has room again (`ROOM_AGAIN`)."""
        if self._directory is None:
            return
        try:
            free = await asyncio.to_thread(free_bytes, self._directory)
        except OSError:
            return  # the folder is gone: the file checks say so
        if self.full is None and free < FULL_BELOW:
            self._set_full(
                f"no space left for the database {self.where}: its disk has "
                f"{free // 1024} KiB free; new messages are refused until there is room"
            )
        elif self.full is not None and free >= ROOM_AGAIN:
            self._set_room()

    def _set_full(self, message: str) -> None:
        if self.full is None:
            log.warning("store full: %s", message)
        self.full = message

    def _set_room(self) -> None:
        log.info("store has room again: %s", self.where)
        self.full = None


class ConditionHealth:
    """A `StoreHealth` that reports a lost or full store before the store's own checks.

    A fatal result of those checks (a deleted or overwritten file) marks the store lost.
    """

    def __init__(self, inner: StoreHealth, condition: StoreCondition) -> None:
        self._inner = inner
        self._condition = condition

    async def check(self) -> HealthStatus:
        return await self._checked(self._inner.check)

    async def quick_check(self) -> HealthStatus:
        return await self._checked(self._inner.quick_check)

    async def _checked(self, check: Callable[[], Awaitable[HealthStatus]]) -> HealthStatus:
        condition = self._condition
        if condition.lost is not None:
            return HealthStatus(False, condition.lost, fatal=True)
        status = await check()
        if status.fatal:
            condition.mark_lost(status.detail)
            return status
        await condition.check_space()
        if condition.full is not None:
            return HealthStatus(False, condition.full)
        return status
