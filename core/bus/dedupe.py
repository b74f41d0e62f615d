"""Keys taken once on the ``dedupe`` table: platform event ids, idempotency keys, and
one-time keys (a webhook request's signature) that refuse a replay.

Every function runs inside the publishing transaction, so a key is taken exactly when
its message is stored: a publish that fails leaves the key free for a retry. The table
is shared by every process and gateway on the database, so a key taken by one is seen
by all.
"""

from __future__ import annotations

from sqlalchemy import Connection, bindparam, delete, select, update

from core.bus.base import OnceKey
from core.bus.tables import DedupeRow
from core.store.sql import insert_ignore

__all__ = ["DEDUPE_WINDOW_SECONDS", "prune_once_in", "take_in"]

DEDUPE_WINDOW_SECONDS = 24 * 3600
"""How long an event id or idempotency key maps to its first message."""

_dedupe = DedupeRow.__table__  # type: ignore[attr-defined]
_FIRST = select(_dedupe.c.message_id, _dedupe.c.created_at).where(_dedupe.c.key == bindparam("key"))
_RENEW = (
    update(_dedupe)
    .where(_dedupe.c.key == bindparam("b_key"), _dedupe.c.created_at == bindparam("stale_at"))
    .values(message_id=bindparam("b_message_id"), created_at=bindparam("now"))
)


def take_in(
    conn: Connection,
    dialect: str,
    key: str,
    message_id: str,
    now: float,
    window: float = DEDUPE_WINDOW_SECONDS,
) -> str | None:
    """Take ``key`` for ``message_id``; the message id that has it already, if any.

    Inserted first, so a new key (the common case) costs one statement. A key older
    than ``window`` is taken over only if nobody else took it over meanwhile.
    """
    row = {"key": key, "message_id": message_id, "created_at": now}
    if insert_ignore(dialect, _dedupe).run(conn, row) == 1:
        return None
    first = conn.execute(_FIRST, {"key": key}).first()
    if first is None:  # deleted since (pruned): ours to take
        return take_in(conn, dialect, key, message_id, now, window)
    if first.created_at >= now - window:
        return str(first.message_id)
    renew = {"b_key": key, "stale_at": first.created_at, "b_message_id": message_id, "now": now}
    if conn.execute(_RENEW, renew).rowcount == 1:
        return None
    return take_in(conn, dialect, key, message_id, now, window)  # renewed concurrently


def prune_once_in(conn: Connection, channel: str, older_than: float) -> int:
    """Delete ``channel``'s one-time keys taken before ``older_than``; how many."""
    prefix = OnceKey("", 0).row_key(channel)
    gone = delete(_dedupe).where(
        _dedupe.c.created_at < older_than, _dedupe.c.key.startswith(prefix, autoescape=True)
    )
    return int(conn.execute(gone).rowcount or 0)
