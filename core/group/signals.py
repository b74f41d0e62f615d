"""Group wake-ups: ``LISTEN``/``NOTIFY`` on the channel ``familiar_group``.

A payload is a small JSON object: ``{"kind": ..., "from": <member>, "to": <member or
null>}`` plus whatever the kind needs. Roster changes send ``group.joined`` and the
like; a delegated task can send its own kinds to one member. A receiver ignores its
own notes and those for another member. Notes are hints: whoever waits for one also
polls the store, so a lost connection (opened again with backoff) loses no work.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

from core.group.tables import GROUP_NOTIFY_CHANNEL
from core.store.pg_listen import ListenConnection

__all__ = ["GroupSignals", "SignalHandler"]

log = logging.getLogger(__name__)

SignalHandler = Callable[[dict[str, Any]], None]
"""Called on the event loop with a note's decoded payload."""
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
        self.member = member
        self._listen = ListenConnection(
            url,
            GROUP_NOTIFY_CHANNEL,
            self._receive,
            what="group wake-up connection",
            prepare=self._hold_replica_lock,
        )
        self._handlers: list[SignalHandler] = []

    def on(self, handler: SignalHandler) -> None:
        """Call ``handler`` with every note for this member (or for everyone)."""
        self._handlers.append(handler)

    async def start(self) -> None:
        await self._listen.start()

    async def stop(self) -> None:
        await self._listen.stop()

    async def notify(self, kind: str, *, to: str | None = None, **fields: Any) -> bool:
        """Send one note (False when it could not be sent: the receivers poll)."""
        payload = json.dumps({**fields, "kind": kind, "from": self.member, "to": to})
        return await self._listen.notify(payload)

    async def _hold_replica_lock(self, conn: Any) -> None:
        await conn.execute(f"SELECT pg_advisory_lock_shared({_REPLICA_KEY})", self.member)

    async def last_replica(self) -> bool:
        """Whether no other replica of this member (another gateway on the same
        ``store.schema``) holds its wake-up connection now; True when it cannot tell (this
        connection is lost). Call it when stopping: it gives up this replica's share."""
        async with self._listen.using() as conn:
            if conn is None:
                return True
            try:
                await conn.execute(f"SELECT pg_advisory_unlock_shared({_REPLICA_KEY})", self.member)
                alone = await conn.fetchval(
                    f"SELECT pg_try_advisory_lock({_REPLICA_KEY})", self.member
                )
                return bool(alone)
            except Exception as exc:  # asyncpg's errors, a dropped connection
                log.debug("group replica check failed: %s", exc)
                return True

    def _receive(self, payload: str) -> None:
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
