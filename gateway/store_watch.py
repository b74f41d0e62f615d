"""Watches the store while the gateway runs; a lost database file stops the gateway.

The store's identity check (`core.store.health`) runs every few seconds and on every
``/readyz``. A failing check makes the gateway not ready, with the reason. A fatal one
(the SQLite file deleted or replaced) is logged once, with what to do, and asks the
gateway to stop with a non-zero exit: carrying on would write every reply into a file
that no one will ever open again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from core.store.health import HealthStatus, StoreHealth

__all__ = ["StoreWatch"]

log = logging.getLogger(__name__)

FATAL_HINT = 'restore it from a backup; see "familiar doctor"'


class StoreWatch:
    """Checks ``health`` every ``interval`` seconds and on demand.

    Args:
        health: the open store's checks.
        on_fatal: called once, with the reason, when the store is lost for good.
        interval: seconds between background checks.
    """

    def __init__(
        self, *, health: StoreHealth, on_fatal: Callable[[str], None], interval: float = 2.0
    ) -> None:
        self._health = health
        self._on_fatal = on_fatal
        self._interval = interval
        self.last: HealthStatus | None = None
        self.fatal: str | None = None
        """Why the store was lost for good (None while it is not)."""
        self._task: asyncio.Task[None] | None = None

    @property
    def problem(self) -> str | None:
        """What is wrong with the store now (None while it is fine)."""
        if self.fatal is not None:
            return self.fatal
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
            self.fatal = status.detail
            log.error("store lost: %s; stopping the gateway (%s)", status.detail, FATAL_HINT)
            self._on_fatal(status.detail)
        return status

    async def _loop(self) -> None:
        while self.fatal is None:
            await asyncio.sleep(self._interval)
            try:
                await self.check()
            except Exception:  # a bug in a check must not end the watch silently
                log.exception("store check raised")
