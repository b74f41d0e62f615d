"""Watches the store while the gateway runs; a lost store stops the gateway.

The store's checks (`core.store.health` behind `core.store.condition`: the file's
identity and header, or the schema's revision on a server; free space) run every few
seconds and on every ``/readyz``. A failing check, or a full disk, makes the gateway not
ready, with the reason. A lost store (the file deleted, replaced or overwritten, a
corrupted page met by any statement, the database dropped) is logged once, with what to
do, and asks the gateway to stop with a non-zero exit: carrying on would write into a
store that no one will read again.

How it exits (`start_failed`, `store_lost_exit`): a process nobody supervises prints
one line and exits 1; a supervised role tells the supervisor why and exits `EX_STORE`,
so the supervisor stops every role instead of restarting this one, and exits 1.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
from collections.abc import Callable, Mapping

from core.errors import StoreError
from core.store.engine import Store
from core.store.health import HealthStatus
from gateway.process_table import EX_STORE, STORE_LOST_FIELD, SUPERVISED_ENV
from gateway.systemd import sd_notify

__all__ = ["StoreWatch", "start_failed", "store_lost_exit"]

log = logging.getLogger(__name__)

FATAL_HINT = 'restore it from a backup; see "familiar doctor"'


class StoreWatch:
    """Checks the store every ``interval`` seconds and on demand.

    Args:
        store: the open store.
        on_fatal: called once, with the reason, when the store is lost for good (by a
            check, or by any statement that met a corrupted or vanished store).
        interval: seconds between background checks.
    """

    def __init__(
        self, *, store: Store, on_fatal: Callable[[str], None], interval: float = 2.0
    ) -> None:
        self._health = store.health
        self._condition = store.condition
        self._on_fatal = on_fatal
        self._interval = interval
        self.last: HealthStatus | None = None
        self.fatal: str | None = None
        """Why the store was lost for good (None while it is not)."""
        self._task: asyncio.Task[None] | None = None
        store.condition.on_lost(self._lost)

    @property
    def problem(self) -> str | None:
        """What is wrong with the store now (None while it is fine)."""
        if self.fatal is not None:
            return self.fatal
        if self._condition.full is not None:
            return self._condition.full
        return None if self.last is None or self.last.ok else self.last.detail

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop(), name="familiar-store-watch")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def check(self) -> HealthStatus:
        """Check now; report a fatal failure (once)."""
        status = await self._health.check()
        if self.fatal is not None:
            return status
        if self.last is not None and self.last.ok and not status.ok and not status.fatal:
            log.warning("store check failed: %s", status.detail)
        self.last = status
        if status.fatal:
            self._lost(status.detail)
        return status

    def _lost(self, reason: str) -> None:
        if self.fatal is not None:
            return
        self.fatal = reason
        log.error("store lost: %s; stopping the gateway (%s)", reason, FATAL_HINT)
        self._on_fatal(reason)

    async def _loop(self) -> None:
        while self.fatal is None:
            await asyncio.sleep(self._interval)
            try:
                await self.check()
            except Exception:  # a bug in a check must not end the watch silently
                log.exception("store check raised")


def store_lost_exit(watch: StoreWatch | None, env: Mapping[str, str]) -> int:
    """The exit status of a gateway whose store was lost while it served."""
    reason = watch.fatal if watch is not None and watch.fatal else "the store was lost"
    return _store_exit(f"stopping: {reason}", env)


def start_failed(exc: Exception, env: Mapping[str, str]) -> int:
    """The exit status of a gateway that could not start (after the one line why)."""
    if isinstance(exc, StoreError):
        return _store_exit(f"cannot start: {exc}", env)
    _say(f"cannot start: {exc}")
    return 1


def _store_exit(reason: str, env: Mapping[str, str]) -> int:
    line = " ".join(reason.split())
    if env.get(SUPERVISED_ENV):
        # The supervisor says it, once, however many roles found the store gone.
        sd_notify(f"STATUS={line[:200]}\n{STORE_LOST_FIELD}={line}")
        return EX_STORE
    sd_notify(f"STATUS={line[:200]}")
    _say(line)
    return 1


def _say(message: str) -> None:
    """The one line a failed gateway prints (no traceback, whatever the cause)."""
    print(f"familiar: {' '.join(message.split())}", file=sys.stderr)
