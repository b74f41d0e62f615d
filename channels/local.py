"""The machinery of the local channels (CLI, web panel): senders on the control socket.

A sender publishes through the control API and waits there for the reply; the channel
tells apart the replies a sender received, the ones watchers get, and the ones nobody
saw (kept unread in their session).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from channels.base import ChannelContext
from core.errors import BusError
from core.messages import InboundMessage, OutboundMessage

__all__ = ["ChannelStopped", "LocalChannel", "Submitted"]

log = logging.getLogger(__name__)

_HANDED_MEMORY = 10_000
"""How many handed-over replies are remembered until their delivery comes by."""


class ChannelStopped(BusError):
    """A local channel (the CLI's, the web panel's) is not running."""


@dataclass(frozen=True, slots=True)
class Submitted:
    """A published message: its id, and whether an earlier send with its client id won."""

    message_id: str
    duplicate: bool = False


@dataclass(slots=True)
class _Senders:
    """The connected senders waiting for one message's reply."""

    count: int = 0
    decided: asyncio.Event = field(default_factory=asyncio.Event)
    """Set once a sender has the reply, or none is connected any more."""


class LocalChannel:
    """Publishes the messages of a local sender and tells apart the replies somebody received.

    The base of the CLI channel (``familiar send``/``chat``) and the web panel's channel:
    both publish through the control socket, where a sender waits for the reply.

    The control API waits for a reply through the bus (`SqlBus.wait_reply`) and
    hands it to the connected sender; this channel is told about senders (`publish`
    attaches one, `detach` ends it) and about each handover (`handed`). When the
    DeliveryWorker then delivers the reply here, `send` knows whether a sender got it;
    if none did, watchers of the session (``familiar chat``, the panel's Chat page) get
    it, and a reply nobody received is reported to `_unattended`.
    """

    name: str
    """The channel's name (a subclass sets it)."""

    def __init__(self, *, handover_grace: float = 30.0) -> None:
        """Create the channel.

        Args:
            handover_grace: how long `send` waits for a connected sender to hand the reply
                over before counting it as unattended.
        """
        self._handover_grace = handover_grace
        self._context: ChannelContext | None = None
        self._stopped = asyncio.Event()
        self._stop_cancels: set[asyncio.Future[Any]] = set()
        """Waits that `stop` cancels (see `cancel_on_stop`)."""
        self._senders: dict[str, _Senders] = {}
        self._handed: dict[str, None] = {}
        """Ids of replies a sender received, oldest first, until their delivery comes by."""
        # Terminals watching a session for replies nobody waits for (schedules, check-ins).
        # None in a queue means "the channel stopped".
        self._watchers: dict[str, set[asyncio.Queue[OutboundMessage | None]]] = {}

    @property
    def waiting(self) -> int:
        """How many messages have a connected sender waiting for the reply."""
        return len(self._senders)

    async def start(self, context: ChannelContext) -> None:
        self._context = context
        self._stopped.clear()

    async def stop(self) -> None:
        self._context = None
        self._stopped.set()
        waits, self._stop_cancels = self._stop_cancels, set()
        for wait in waits:
            wait.cancel()
        for queues in self._watchers.values():
            for queue in queues:
                queue.put_nowait(None)

    @property
    def stopped(self) -> bool:
        """Whether the channel has stopped (and not started again)."""
        return self._stopped.is_set()

    async def until_stopped(self) -> None:
        """Return once the channel stops (senders then answer ``timeout``)."""
        await self._stopped.wait()

    def cancel_on_stop(self, wait: asyncio.Future[Any]) -> None:
        """Cancel ``wait`` when the channel stops (at once if it has); `forget` it after.

        Cheaper than racing each wait against `until_stopped`: no task per wait.
        """
        if self._stopped.is_set():
            wait.cancel()
        else:
            self._stop_cancels.add(wait)

    def forget(self, wait: asyncio.Future[Any]) -> None:
        """``wait`` is over: `stop` need not cancel it."""
        self._stop_cancels.discard(wait)

    async def send(self, message: OutboundMessage) -> None:
        """Deliver a final reply: a sender got it, or watchers get it, or it is unattended."""
        message_id = message.inbound_id
        senders = self._senders.get(message_id)
        if senders is not None and not senders.decided.is_set():
            # The sender is woken by the same settle: let it finish handing over.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._handover_grace):
                    await senders.decided.wait()
        if message_id in self._handed:
            del self._handed[message_id]
            return
        watchers = self._watchers.get(message.session_key)
        if watchers:
            for queue in watchers:
                queue.put_nowait(message)
            return
        await self._unattended(message)

    async def _unattended(self, message: OutboundMessage) -> None:
        """A reply no connected sender and no watcher received: kept in its session, unread.

        ``familiar chat`` (or the panel) shows it when it next opens the session. Raising
        (the store is away, or the channel stopped) leaves the delivery to be retried.
        """
        if self._context is None:
            raise ChannelStopped(f"the {self.name} channel is not running")
        await self._context.unread.keep_unread(message)
        log.info(
            "reply kept unread message_id=%s session=%s kind=%s",
            message.inbound_id,
            message.session_key,
            message.kind,
        )

    @contextlib.asynccontextmanager
    async def watch(self, session: str) -> AsyncIterator[asyncio.Queue[OutboundMessage | None]]:
        """Receive the replies of ``session`` that no sender received (e.g. schedules).

        A None in the queue means the channel stopped.
        """
        queue: asyncio.Queue[OutboundMessage | None] = asyncio.Queue()
        self._watchers.setdefault(session, set()).add(queue)
        try:
            yield queue
        finally:
            watchers = self._watchers.get(session, set())
            watchers.discard(queue)
            if not watchers:
                self._watchers.pop(session, None)

    async def publish(self, message: InboundMessage) -> Submitted:
        """Publish ``message`` durably and attach the caller as its sender.

        With an ``event_id`` (client id) already used within the dedupe window nothing
        new is stored: the caller is attached to the first message instead. Call
        `detach` when done.

        Raises:
            ChannelStopped: the channel is not running.
        """
        if self._context is None:
            raise ChannelStopped(f"the {self.name} channel is not running")
        self._attach(message.id)  # before publishing: the reply cannot slip past
        try:
            published = await self._context.bus.publish_inbound(message)
        except BaseException:
            self.detach(message.id)
            raise
        if published.message_id != message.id:
            self._attach(published.message_id)
            self.detach(message.id)
        return Submitted(published.message_id, published.duplicate)

    def _attach(self, message_id: str) -> None:
        senders = self._senders.setdefault(message_id, _Senders())
        senders.count += 1
        if message_id not in self._handed:
            senders.decided.clear()

    def handed(self, message_id: str) -> None:
        """A connected sender received the reply to ``message_id``."""
        self._handed[message_id] = None
        while len(self._handed) > _HANDED_MEMORY:
            del self._handed[next(iter(self._handed))]
        senders = self._senders.get(message_id)
        if senders is not None:
            senders.decided.set()

    def detach(self, message_id: str) -> None:
        """A sender of ``message_id`` is gone (with or without the reply)."""
        senders = self._senders.get(message_id)
        if senders is None:
            return
        senders.count -= 1
        if senders.count <= 0:
            del self._senders[message_id]
            senders.decided.set()
