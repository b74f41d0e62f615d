"""In-process fan-out of ephemeral messages (stream deltas, progress) to their subscribers."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from pydantic import TypeAdapter

from core.bus.wakeups import Wakeups
from core.messages import EphemeralMessage, StreamDelta

__all__ = ["EphemeralHub", "Subscription"]

_EPHEMERAL: TypeAdapter[EphemeralMessage] = TypeAdapter(EphemeralMessage)


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

    async def next(self, timeout: float | None) -> EphemeralMessage | None:
        """The oldest item, or None once ``timeout`` seconds pass without one."""
        try:
            async with asyncio.timeout(timeout):
                return await self.get()
        except TimeoutError:
            return None


class EphemeralHub:
    """Delivers ephemerals to whoever subscribed to their inbound message.

    Ephemerals are not durable by design (the final reply is): they reach only
    subscribers in this process, keyed by the inbound message id, so each emit costs
    the same however many other messages are being streamed. Once `connect`-ed to the
    other processes' wake-ups, a subscription here is announced to them (``sub``) and
    their ephemerals of that message are relayed here (``eph``), only to the processes
    that asked.
    """

    def __init__(self) -> None:
        self._subs: dict[str, set[Subscription]] = {}
        self._remote: dict[str, set[str]] = {}
        """Message id -> the peers (other processes) subscribed to it."""
        self._wakeups: Wakeups | None = None

    def connect(self, wakeups: Wakeups) -> None:
        """Relay ephemerals to and from the other processes sharing the bus."""
        self._wakeups = wakeups
        wakeups.on("sub", lambda mid, peer: self._remote.setdefault(mid, set()).add(peer))
        wakeups.on("unsub", self._unsubscribed)
        wakeups.on("eph", lambda data, _peer: self._emit_local(_EPHEMERAL.validate_json(data)))
        # A process that (re)starts learns what we are subscribed to.
        wakeups.on("hello", lambda _data, peer: self._resend_subs(peer))

    def _unsubscribed(self, message_id: str, peer: str) -> None:
        peers = self._remote.get(message_id)
        if peers is not None:
            peers.discard(peer)
            if not peers:
                del self._remote[message_id]

    def _resend_subs(self, peer: str) -> None:
        if self._wakeups is not None and self._subs:
            self._wakeups.send_to(peer, *(("sub", mid) for mid in self._subs))

    def emit(self, message: EphemeralMessage) -> None:
        self._emit_local(message)
        peers = self._remote.get(message.inbound_id)
        if peers and self._wakeups is not None:
            note = ("eph", message.model_dump_json())
            for peer in list(peers):
                if not self._wakeups.send_to(peer, note):
                    self._unsubscribed(message.inbound_id, peer)

    def _emit_local(self, message: EphemeralMessage) -> None:
        for subscription in self._subs.get(message.inbound_id, ()):
            subscription.put(message)

    def has_subscribers(self, message_id: str) -> bool:
        return message_id in self._subs or message_id in self._remote

    @asynccontextmanager
    async def subscribe(self, message_id: str) -> AsyncIterator[Subscription]:
        """Receive the ephemerals of inbound ``message_id`` while the context is open."""
        subscription = Subscription(message_id)
        if message_id not in self._subs and self._wakeups is not None:
            self._wakeups.announce(("sub", message_id))
        self._subs.setdefault(message_id, set()).add(subscription)
        try:
            yield subscription
        finally:
            subs = self._subs.get(message_id)
            if subs is not None:
                subs.discard(subscription)
                if not subs:
                    del self._subs[message_id]
                    if self._wakeups is not None:
                        self._wakeups.announce(("unsub", message_id))
