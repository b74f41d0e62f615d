"""One PostgreSQL connection that ``LISTEN``s on a channel and comes back when it drops.

The bus's wake-ups (`core.bus.wake_pg`) and the group's notes (`core.group.signals`)
each hold one. Notes are hints: while the connection is lost (it is opened again with
backoff) their readers poll the store, so nothing is lost with them.

A lost connection is noticed three ways: asyncpg's termination callback, a query on it
that fails because it closed (asyncpg skips the callback when the server drops the
connection while a query is in flight), and a probe every ``probe_every`` seconds, which
also catches a connection that silently stopped answering (a network cut).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from sqlalchemy.engine import make_url

__all__ = ["MAX_PAYLOAD", "ListenConnection"]

log = logging.getLogger(__name__)

MAX_PAYLOAD = 7900
"""PostgreSQL refuses NOTIFY payloads of 8000 bytes or more."""

PROBE_EVERY = 15.0
"""Seconds between probes of an idle connection: how long a silently dead one goes unseen."""

PROBE_TIMEOUT = 5.0
"""Seconds a probe waits for its answer (at most ``probe_every``)."""


class ListenConnection:
    """An asyncpg connection listening on ``channel``, opened again whenever it is lost.

    Args:
        url: the store's SQLAlchemy URL (``postgresql+asyncpg://...``).
        channel: the NOTIFY channel.
        receive: called on the event loop with each note's payload.
        what: names the connection in the log lines about losing it.
        prepare: run on each new connection before it listens (e.g. to take a lock).
        reconnected: called after the connection came back.
        probe_every: seconds between checks that the connection still answers.
    """

    def __init__(
        self,
        url: str,
        channel: str,
        receive: Callable[[str], None],
        *,
        what: str,
        prepare: Callable[[Any], Awaitable[None]] | None = None,
        reconnected: Callable[[], None] | None = None,
        probe_every: float = PROBE_EVERY,
    ) -> None:
        self._dsn = make_url(url).set(drivername="postgresql").render_as_string(False)
        self.channel = channel
        self._receive = receive
        self._what = what
        self._prepare = prepare
        self._reconnected = reconnected
        self._conn: Any = None
        """The asyncpg connection (asyncpg is imported only when PostgreSQL is used)."""
        self._keeper: asyncio.Task[None] | None = None
        self._lost = asyncio.Event()
        self._in_use = asyncio.Lock()
        """asyncpg runs one query at a time on a connection: notes, probes, callers' queries."""
        self._probe_every = probe_every
        self._stopped = False

    @property
    def conn(self) -> Any:
        """The open connection, or None while it is lost."""
        conn = self._conn
        return None if conn is None or conn.is_closed() else conn

    async def start(self) -> None:
        await self._connect()
        self._keeper = asyncio.create_task(self._keep(), name=f"listen-{self.channel}")

    async def stop(self) -> None:
        self._stopped = True
        if self._keeper is not None:
            self._keeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._keeper
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                await conn.close(timeout=5)

    @contextlib.asynccontextmanager
    async def using(self) -> AsyncIterator[Any]:
        """The open connection (None while it is lost), for one caller at a time.

        A query that fails because the connection closed starts opening it again.
        """
        async with self._in_use:
            conn = self.conn
            try:
                yield conn
            finally:
                self._notice_closed()

    async def notify(self, payload: str) -> bool:
        """Send one note on the channel (False when it could not be sent: readers poll)."""
        if len(payload.encode()) > MAX_PAYLOAD:
            return False
        async with self.using() as conn:
            if conn is None:
                return False
            try:
                await conn.execute("SELECT pg_notify($1, $2)", self.channel, payload)
            except Exception as exc:  # asyncpg's errors, a dropped connection
                log.debug("%s: notify failed: %s", self._what, exc)
                return False
        return True

    def _notice_closed(self) -> None:
        conn = self._conn
        if conn is not None and conn.is_closed():
            self._lost.set()

    async def _probe(self) -> None:
        """Mark the connection lost unless it answers a query within ``PROBE_TIMEOUT``."""
        async with self.using() as conn:
            if conn is None:
                return
            try:
                await conn.fetchval("SELECT 1", timeout=min(PROBE_TIMEOUT, self._probe_every))
            except Exception as exc:  # asyncpg's errors, TimeoutError, a dropped connection
                log.debug("%s: probe failed: %s", self._what, exc)
                conn.terminate()
                self._lost.set()

    def _terminated(self, conn: object) -> None:
        if conn is self._conn:  # not a late word from a connection already replaced
            self._lost.set()

    def _listener(self, _conn: object, _pid: int, _channel: str, payload: str) -> None:
        self._receive(payload)

    async def _connect(self) -> None:
        import asyncpg  # type: ignore[import-untyped]  # the postgres extra

        conn = await asyncpg.connect(self._dsn, timeout=10)
        if self._prepare is not None:
            await self._prepare(conn)
        await conn.add_listener(self.channel, self._listener)
        conn.add_termination_listener(self._terminated)
        self._conn = conn
        self._lost.clear()

    async def _keep(self) -> None:
        """Open the connection again whenever it is lost."""
        delay = 0.5
        while not self._stopped:
            try:
                await asyncio.wait_for(self._lost.wait(), self._probe_every)
            except TimeoutError:
                await self._probe()
                continue
            self._conn = None
            log.warning("%s lost: readers poll meanwhile", self._what)
            while not self._stopped:
                await asyncio.sleep(delay)
                try:
                    await self._connect()
                except Exception as exc:  # asyncpg's errors, OSError, TimeoutError
                    delay = min(delay * 2, 30.0)
                    log.warning("%s failed, retry in %.0fs: %s", self._what, delay, exc)
                    continue
                delay = 0.5
                if self._reconnected is not None:
                    self._reconnected()
                break
