"""In-process fan-out of ephemeral messages (stream deltas, progress) to their subscribers."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from core.messages import EphemeralMessage, StreamDelta

__all__ = ["EphemeralHub", "Subscription"]


class Subscription:
    """The ephemerals of one inbound message, in order, for one subscriber.

    Nothing is dropped. A subscriber that lags behind gets consecutive deltas merged into
    one, so what waits for it is at most one delta per progress note, however long the
    reply.
    """

    def __init__(self, message_id: str) -> None:
        self.message_id = message_id
        self._items: deque[EphemeralMessage] = deque()
        self._tail: list[str] = []
        """Text of the last item while it is a delta that later deltas were merged into."""
        self._ready = asyncio.Event()

    def __len__(self) -> int:
        return len(self._items)

    def put(self, item: EphemeralMessage) -> None:
        if isinstance(item, StreamDelta) and self._items and self._tail:
            self._tail.append(item.text)
        else:
            self._seal()
            self._items.append(item)
            self._tail = [item.text] if isinstance(item, StreamDelta) else []
        self._ready.set()

    def _seal(self) -> None:
        """Write the merged text into the last item: nothing more is merged into it."""
        if len(self._tail) > 1:
            self._items[-1] = self._items[-1].model_copy(update={"text": "".join(self._tail)})
        self._tail = []

    def get_nowait(self) -> EphemeralMessage | None:
        """The oldest item, or None when there is none."""
        if not self._items:
            return None
        if len(self._items) == 1:
            self._seal()
            self._ready.clear()
        return self._items.popleft()

    async def get(self) -> EphemeralMessage:
        """Wait for the oldest item."""
        while (item := self.get_nowait()) is None:
            await self._ready.wait()
        return item


class EphemeralHub:
    """Delivers ephemerals to whoever subscribed to their inbound message.

    Ephemerals are not durable by design (the final reply is): they reach only
    subscribers in this process, keyed by the inbound message id, so each emit costs
    the same however many other messages are being streamed.
    """

    def __init__(self) -> None:
        self._subs: dict[str, set[Subscription]] = {}

    def emit(self, message: EphemeralMessage) -> None:
        for subscription in self._subs.get(message.inbound_id, ()):
            subscription.put(message)

    def has_subscribers(self, message_id: str) -> bool:
        return message_id in self._subs

    @asynccontextmanager
    async def subscribe(self, message_id: str) -> AsyncIterator[Subscription]:
        """Receive the ephemerals of inbound ``message_id`` while the context is open."""
        subscription = Subscription(message_id)
        self._subs.setdefault(message_id, set()).add(subscription)
        try:
            yield subscription
        finally:
            subs = self._subs.get(message_id)
            if subs is not None:
                subs.discard(subscription)
                if not subs:
                    del self._subs[message_id]
