"""Messages whose turn failed on the store: given back as soon as the store takes writes.

A turn that cannot write its outcome (no space left, the database unreachable) has
stored nothing of it, and its message stays claimed by this worker until the lease ends
(a minute by default). Releasing it is a write too, so it is retried every second until
it works: the message is claimable again within a second of the store recovering, and,
as with a graceful release, the failed attempt is not counted against the message.
"""

from __future__ import annotations

import asyncio
import logging

from core.bus.sql import SqlBus
from core.errors import StoreError, StoreLost

__all__ = ["StoreRetries"]

log = logging.getLogger(__name__)

RETRY_SECONDS = 1.0


class StoreRetries:
    """Releases, in the background, messages whose turn failed on the store.

    Args:
        inbox: the bus, to release the claims.
        owner: the lease owner (this runtime).
    """

    def __init__(self, *, inbox: SqlBus, owner: str, interval: float = RETRY_SECONDS) -> None:
        self._inbox = inbox
        self._owner = owner
        self._interval = interval
        self._tasks: set[asyncio.Task[None]] = set()

    def release_later(self, message_id: str) -> None:
        task = asyncio.create_task(self._release(message_id), name=f"release-{message_id}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def stop(self) -> None:
        """Give up; what was not released yet is released by the next start (its owner
        is gone then) or when its lease ends."""
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _release(self, message_id: str) -> None:
        while True:
            try:
                await self._inbox.release([message_id], owner=self._owner)
            except StoreLost:
                return  # the gateway stops
            except StoreError:
                await asyncio.sleep(self._interval)
                continue
            log.info("released after a store failure message_id=%s", message_id)
            return
