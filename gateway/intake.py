"""Stopping a gateway's intake once, and the last deliveries before its channels stop.

Intake stops either on the supervisor's drain signal (`gateway.stop_order`: the front
stops taking messages in while the agent workers finish their turns) or at the start
of the shutdown, whichever comes first; the second asks for the same, single stop.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence

from core.bus.base import Outbox

__all__ = ["Intake", "drain_outbox"]

log = logging.getLogger(__name__)

DRAIN_SECONDS = 2.0
"""How long the last deliveries may take before the channels stop."""


class Intake:
    """Runs ``stop`` (no new messages from any listener or channel restart) once."""

    def __init__(self, stop: Callable[[], Awaitable[None]]) -> None:
        self._stop = stop
        self._stopping: asyncio.Future[None] | None = None

    @property
    def stopped(self) -> bool:
        """Whether intake was asked to stop (it may still be stopping)."""
        return self._stopping is not None

    def stop_soon(self) -> None:
        """Ask for the stop from a signal handler (in the running loop)."""
        if self._stopping is None:
            log.info("intake stopping: no new messages; delivering until stopped")
            self._stopping = asyncio.ensure_future(self._stop())

    async def stop(self) -> None:
        """Stop intake (once) and wait until it has stopped."""
        self.stop_soon()
        assert self._stopping is not None
        await self._stopping


async def drain_outbox(outbox: Outbox, channels: Sequence[str]) -> None:
    """Give replies settled during the grace a moment to reach their channels."""
    deadline = time.monotonic() + DRAIN_SECONDS
    due: list[str] = []
    while time.monotonic() < deadline:
        due = [n for n in channels if await outbox.due_outbound(n, limit=1)]
        if not due:
            return
        await asyncio.sleep(0.05)
    log.info("replies left for delivery after restart channels=%s", due)
