"""The typing indicator a Teams conversation shows while its message is worked on."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

__all__ = ["Typing"]

log = logging.getLogger(__name__)

_MAX_LIFETIME = 600.0
"""A reply that never comes to this process stops the indicator after this long."""


class Typing:
    """Sends ``typing`` after ``first_wait`` seconds, then every ``interval`` seconds,
    until `stop` (or 10 minutes). A reply quicker than ``first_wait`` needs none.

    Args:
        send: sends one typing activity to the conversation (raising is logged, not fatal).
        interval: seconds between two indicators (Teams shows one for a few seconds).
        first_wait: seconds before the first one.
    """

    def __init__(
        self, send: Callable[[], Awaitable[None]], *, interval: float, first_wait: float
    ) -> None:
        self._send = send
        self._interval = interval
        self._first_wait = first_wait
        self._task: asyncio.Task[None] | None = None
        self.sent = 0

    def start(self, name: str, *, on_done: Callable[[], object]) -> None:
        """Begin; ``on_done`` runs when it ends (stopped, or its lifetime is over)."""
        self._task = asyncio.create_task(self._run(), name=name)
        self._task.add_done_callback(lambda _: on_done())

    async def stop(self) -> None:
        """Stop sending (an indicator in flight is cancelled)."""
        if self._task is not None:
            task, self._task = self._task, None
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _run(self) -> None:
        try:
            async with asyncio.timeout(_MAX_LIFETIME):
                await asyncio.sleep(self._first_wait)
                while True:
                    try:
                        await self._send()
                        self.sent += 1
                    except Exception as exc:  # a courtesy: the reply still comes
                        log.info("teams typing indicator failed: %s", exc)
                    await asyncio.sleep(self._interval)
        except TimeoutError:
            log.info("no reply came within %.0fs; typing indicator stopped", _MAX_LIFETIME)
