"""Group wake-ups: ``LISTEN``/``NOTIFY`` on the channel ``familiar_group``.

A payload is a small JSON object: ``{"kind": ..., "from": <member>, "to": <member or
null>}`` plus whatever the kind needs. Roster changes send ``group.joined`` and the
like; a delegated task can send its own kinds to one member. A receiver ignores its
own notes and those for another member. Notes are hints: whoever waits for one also
polls the store, so a lost connection (opened again with backoff) loses no work.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable
from typing import Any

from sqlalchemy.engine import make_url

from core.group.tables import GROUP_NOTIFY_CHANNEL

__all__ = ["GroupSignals", "SignalHandler"]

log = logging.getLogger(__name__)

SignalHandler = Callable[[dict[str, Any]], None]
"""Called on the event loop with a note's decoded payload."""
_MAX_PAYLOAD = 7900
_REPLICA_KEY = "1717661031, hashtext($1)"
"""The advisory lock every replica of a member holds (shared) on its wake-up connection,
so the one that stops can tell whether others run on: a lock dies with its connection,
a crashed replica's too. Two keys (a class, the name's hash): apart from every one-key
lock (``familiar_group``'s DDL lock, the subagent cap's)."""


class GroupSignals:
    """One LISTEN connection for this member; `notify` sends on it too.

    Args:
        url: the store's SQLAlchemy URL (``postgresql+asyncpg://...``).
        member: this member's name (its own notes are not delivered back).
    """

    def __init__(self, url: str, member: str) -> None:
        self._dsn = make_url(url).set(drivername="postgresql").render_as_string(False)
        self.member = member
        self._conn: Any = None
        """The asyncpg connection (asyncpg is imported only when PostgreSQL is used)."""
        self._handlers: list[SignalHandler] = []
        self._keeper: asyncio.Task[None] | None = None
        self._lost = asyncio.Event()
        self._stopped = False

    def on(self, handler: SignalHandler) -> None:
        """Call ``handler`` with every note for this member (or for everyone)."""
        self._handlers.append(handler)

    async def start(self) -> None:
        await self._connect()
        self._keeper = asyncio.create_task(self._keep(), name="group-signals")

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

    async def notify(self, kind: str, *, to: str | None = None, **fields: Any) -> bool:
        """Send one note (False when it could not be sent: the receivers poll)."""
        payload = json.dumps({**fields, "kind": kind, "from": self.member, "to": to})
        conn = self._conn
        if conn is None or conn.is_closed() or len(payload.encode()) > _MAX_PAYLOAD:
            return False
        try:
            await conn.execute("SELECT pg_notify($1, $2)", GROUP_NOTIFY_CHANNEL, payload)
        except Exception as exc:  # asyncpg's errors, a dropped connection
            log.debug("group notify failed: %s", exc)
            return False
        return True

    async def last_replica(self) -> bool:
        """Whether no other replica of this member (another gateway on the same
        ``store.schema``) holds its wake-up connection now; True when it cannot tell (this
        connection is lost). Call it when stopping: it gives up this replica's share."""
        conn = self._conn
        if conn is None or conn.is_closed():
            return True
        try:
            await conn.execute(f"SELECT pg_advisory_unlock_shared({_REPLICA_KEY})", self.member)
            alone = await conn.fetchval(f"SELECT pg_try_advisory_lock({_REPLICA_KEY})", self.member)
            return bool(alone)
        except Exception as exc:  # asyncpg's errors, a dropped connection
            log.debug("group replica check failed: %s", exc)
            return True

    async def _connect(self) -> None:
        import asyncpg  # type: ignore[import-untyped]  # the postgres extra

        conn = await asyncpg.connect(self._dsn, timeout=10)
        await conn.execute(f"SELECT pg_advisory_lock_shared({_REPLICA_KEY})", self.member)
        await conn.add_listener(GROUP_NOTIFY_CHANNEL, self._receive)
        conn.add_termination_listener(lambda _c: self._lost.set())
        self._conn = conn
        self._lost.clear()

    async def _keep(self) -> None:
        delay = 0.5
        while not self._stopped:
            await self._lost.wait()
            self._conn = None
            log.warning("group wake-up connection lost: the roster is polled meanwhile")
            while not self._stopped:
                await asyncio.sleep(delay)
                try:
                    await self._connect()
                except Exception as exc:  # asyncpg's errors, OSError, TimeoutError
                    delay = min(delay * 2, 30.0)
                    log.warning("group wake-up connection failed, retry in %.0fs: %s", delay, exc)
                    continue
                delay = 0.5
                break

    def _receive(self, _conn: object, _pid: int, _channel: str, payload: str) -> None:
        try:
            note = json.loads(payload)
        except ValueError:
            return
        if not isinstance(note, dict) or note.get("from") == self.member:
            return
        if note.get("to") not in (None, self.member):
            return
        for handler in self._handlers:
            try:
                handler(note)
            except Exception:
                log.exception("group signal handler failed kind=%s", note.get("kind"))
