"""In-process fan-out of ephemeral messages (stream deltas, progress) to subscribers."""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from core.messages import EphemeralMessage

__all__ = ["EphemeralHub"]

log = logging.getLogger(__name__)


class EphemeralHub:
    """Best-effort delivery of ephemerals to whoever listens on a channel.

    Ephemerals are not durable by design: a slow subscriber's queue is bounded and
    overflow is dropped (the final reply is durable and always arrives).
    """

    def __init__(self, *, queue_size: int = 1000) -> None:
        self._queue_size = queue_size
        self._subs: defaultdict[str, set[asyncio.Queue[EphemeralMessage]]] = defaultdict(set)

    def emit(self, message: EphemeralMessage) -> None:
        for queue in self._subs.get(message.delivery.channel, ()):
            try:
                queue.put_nowait(message)
            except asyncio.QueueFull:
                log.debug("ephemeral dropped channel=%s", message.delivery.channel)

    def has_subscribers(self, channel: str) -> bool:
        return bool(self._subs.get(channel))

    @asynccontextmanager
    async def subscribe(self, channel: str) -> AsyncIterator[asyncio.Queue[EphemeralMessage]]:
        queue: asyncio.Queue[EphemeralMessage] = asyncio.Queue(self._queue_size)
        self._subs[channel].add(queue)
        try:
            yield queue
        finally:
            self._subs[channel].discard(queue)
