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
from typing import Any

from sqlalchemy.engine import make_url

from core.bus.wakeups import Handler

__all__ = ["CHANNEL", "PgWakeups", "wake_channel"]

log = logging.getLogger(__name__)

CHANNEL = "familiar_wake"
_MAX_PAYLOAD = 7900
"""PostgreSQL refuses NOTIFY payloads of 8000 bytes or more."""
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
        self._dsn = make_url(url).set(drivername="postgresql").render_as_string(False)
        self.channel = wake_channel(schema)
        self.name = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self._conn: Any = None
        """The asyncpg connection (asyncpg is imported only when PostgreSQL is used)."""
        self._handlers: defaultdict[str, list[Handler]] = defaultdict(list)
        self._pending: dict[str, list[str]] = {}
        self._flush_scheduled = False
        self._sending: asyncio.Task[None] | None = None
        self._keeper: asyncio.Task[None] | None = None
        self._lost = asyncio.Event()
        self._stopped = False
        self.sent = 0
        self.dropped = 0

    async def start(self) -> None:
        await self._connect()
        self._keeper = asyncio.create_task(self._keep(), name="pg-wakeups")
        self.announce(("hello", ""))

    async def stop(self) -> None:
        self._stopped = True
        if self._keeper is not None:
            self._keeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._keeper
        if self._sending is not None:
            with contextlib.suppress(Exception):
                await self._sending
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                await conn.close(timeout=5)

    async def _connect(self) -> None:
        import asyncpg  # type: ignore[import-untyped]  # the postgres extra

        conn = await asyncpg.connect(self._dsn, timeout=10)
        await conn.add_listener(self.channel, self._receive)
        conn.add_termination_listener(lambda _c: self._lost.set())
        self._conn = conn
        self._lost.clear()

    async def _keep(self) -> None:
        """Open the connection again whenever it is lost."""
        delay = 0.5
        while not self._stopped:
            await self._lost.wait()
            self._conn = None
            log.warning("wake-up connection to PostgreSQL lost: readers poll meanwhile")
            while not self._stopped:
                await asyncio.sleep(delay)
                try:
                    await self._connect()
                except Exception as exc:  # asyncpg's errors, OSError, TimeoutError
                    delay = min(delay * 2, 30.0)
                    log.warning("wake-up connection failed, retry in %.0fs: %s", delay, exc)
                    continue
                delay = 0.5
                self.announce(("hello", ""))
                break

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
            conn = self._conn
            if conn is None or conn.is_closed():
                self.dropped += len(payloads)
                continue
            for n, payload in enumerate(payloads):
                try:
                    await conn.execute("SELECT pg_notify($1, $2)", self.channel, payload)
                except Exception as exc:  # asyncpg's errors, a dropped connection
                    self.dropped += len(payloads) - n
                    log.debug("wake-up notify failed: %s", exc)
                    break
                self.sent += 1

    def _receive(self, _conn: object, _pid: int, _channel: str, payload: str) -> None:
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
        if length > _MAX_PAYLOAD:
            continue
        if current and size + length > _MAX_PAYLOAD:
            chunks.append("\n".join(current))
            current, size = [], 0
        current.append(line)
        size += length
    if current:
        chunks.append("\n".join(current))
    return chunks
