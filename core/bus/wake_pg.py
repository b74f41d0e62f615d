"""`Wakeups` on PostgreSQL: ``LISTEN``/``NOTIFY`` on one channel, across every host.

Each process holds one connection that listens on ``familiar_wake`` (``familiar_wake_<schema>``
with ``store.schema``: assistants on one database never wake each other) and sends its own
notes on it (``pg_notify``, outside any transaction: the note is sent after the
commit it follows). A payload is ``<sender>\\t<target>\\n<lines>``: ``target`` is empty
for a broadcast, else the one peer it is for; a process ignores its own notes and
those for others. Notes of one event-loop iteration are coalesced as with
`core.bus.wake_socket.SocketWakeups`. When the connection drops, it is opened again
with backoff; meanwhile every reader falls back to its poll.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import uuid
from collections import defaultdict

from core.bus.wakeups import Handler
from core.store.pg_listen import MAX_PAYLOAD, ListenConnection

__all__ = ["CHANNEL", "PgWakeups", "wake_channel"]

log = logging.getLogger(__name__)

CHANNEL = "familiar_wake"
_ORDERED = frozenset({"eph", "metric", "sub", "unsub"})


def wake_channel(schema: str | None) -> str:
    """The NOTIFY channel of the assistant whose tables are in ``schema``."""
    return CHANNEL if schema is None else f"{CHANNEL}_{schema}"


class PgWakeups:
    """Wake-ups over PostgreSQL ``LISTEN``/``NOTIFY``.

    Args:
        url: the store's SQLAlchemy URL (``postgresql+asyncpg://...``).
        schema: the store's ``store.schema`` (None: unset).
    """

    def __init__(self, url: str, schema: str | None = None) -> None:
        self._listen = ListenConnection(
            url,
            wake_channel(schema),
            self._receive,
            what="wake-up connection to PostgreSQL",
            reconnected=lambda: self.announce(("hello", "")),
        )
        self.channel = self._listen.channel
        self.name = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self._handlers: defaultdict[str, list[Handler]] = defaultdict(list)
        self._pending: dict[str, list[str]] = {}
        self._flush_scheduled = False
        self._sending: asyncio.Task[None] | None = None
        self._stopped = False
        self.sent = 0
        self.dropped = 0

    async def start(self) -> None:
        await self._listen.start()
        self.announce(("hello", ""))

    async def stop(self) -> None:
        self._stopped = True
        if self._sending is not None:
            with contextlib.suppress(Exception):
                await self._sending
        await self._listen.stop()

    # -- Wakeups -------------------------------------------------------------------------

    def on(self, topic: str, handler: Handler) -> None:
        self._handlers[topic].append(handler)

    def announce(self, *notes: tuple[str, str]) -> None:
        self._queue("", notes)

    def send_to(self, peer: str, *notes: tuple[str, str]) -> bool:
        self._queue(peer, notes)
        return True

    def _queue(self, target: str, notes: tuple[tuple[str, str], ...]) -> None:
        if self._stopped:
            return
        lines = self._pending.setdefault(target, [])
        for topic, data in notes:
            line = f"{topic}\t{data}"
            if topic in _ORDERED or line not in lines:
                lines.append(line)
        if not self._flush_scheduled and not self._is_sending():
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self._flush)

    def _is_sending(self) -> bool:
        """A send is under way: it takes what is queued meanwhile when it is done."""
        return self._sending is not None and not self._sending.done()

    def _flush(self) -> None:
        self._flush_scheduled = False
        if not self._is_sending():
            self._sending = asyncio.get_running_loop().create_task(self._send_pending())

    async def _send_pending(self) -> None:
        """Send what is queued, then what was queued while sending, until nothing is.

        One sender at a time keeps the notes in order, and under load each round trip
        carries every note of the previous one's time (each NOTIFY reaches every
        process of every host, so fewer of them saves work everywhere)."""
        while self._pending:
            pending, self._pending = self._pending, {}
            payloads = [
                f"{self.name}\t{target}\n{chunk}"
                for target, lines in pending.items()
                for chunk in _chunks(lines)
            ]
            for n, payload in enumerate(payloads):
                if not await self._listen.notify(payload):
                    self.dropped += len(payloads) - n
                    break
                self.sent += 1

    def _receive(self, payload: str) -> None:
        head, _, body = payload.partition("\n")
        sender, _, target = head.partition("\t")
        if sender == self.name or (target and target != self.name):
            return
        for line in body.split("\n"):
            topic, _, data = line.partition("\t")
            for handler in self._handlers.get(topic, ()):
                try:
                    handler(data, sender)
                except Exception:
                    log.exception("wake-up handler failed topic=%s", topic)


def _chunks(lines: list[str]) -> list[str]:
    """Lines joined into payloads under PostgreSQL's limit (a longer line is dropped:
    its reader polls)."""
    chunks: list[str] = []
    current: list[str] = []
    size = 0
    for line in lines:
        length = len(line.encode()) + 1
        if length > MAX_PAYLOAD:
            continue
        if current and size + length > MAX_PAYLOAD:
            chunks.append("\n".join(current))
            current, size = [], 0
        current.append(line)
        size += length
    if current:
        chunks.append("\n".join(current))
    return chunks
