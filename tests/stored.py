"""What a running gateway stored, read straight from its SQLite file (read-only).

Channels commit a message before they acknowledge it, and the delivery worker records
a reply as delivered or given up before it takes more: a row is the observable state
that proves something did not (and will not) happen.
"""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path
from typing import Any

__all__ = ["inbound_count", "reply_status"]


def _rows(home: Path, query: str, *args: object) -> list[tuple[Any, ...]]:
    uri = f"{(home / 'familiar.db').as_uri()}?mode=ro"
    with contextlib.closing(sqlite3.connect(uri, uri=True)) as db:
        return db.execute(query, args).fetchall()


def inbound_count(home: Path) -> int:
    """How many inbound messages were ever published (any status)."""
    [(count,)] = _rows(home, "SELECT count(*) FROM inbound")
    return int(count)


def reply_status(home: Path, inbound_id: str) -> str | None:
    """The delivery status of the reply to ``inbound_id``: ``pending``, ``delivered``,
    ``failed`` (given up); None while there is no reply."""
    rows = _rows(home, "SELECT status FROM outbound WHERE inbound_id = ?", inbound_id)
    return str(rows[0][0]) if rows else None
