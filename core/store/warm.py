"""Run the store's code once, on a throwaway in-memory SQLite database.

A role forked from the supervisor's image (``gateway/zygote.py``) that runs code for the
first time writes to objects it shares with the other roles: SQLAlchemy fills its
class-level caches and CPython specialises the bytecode, and every page written
becomes the role's own copy. Opening a store in a fresh role cost ~10.5 MiB of private
memory; after `warm_up` ran in the supervisor it costs ~7.8 MiB (docs/design-notes.md).
"""

from __future__ import annotations

import asyncio
import logging
import threading

from sqlalchemy import Connection, text

from core.store.engine import Store

__all__ = ["warm_up"]

log = logging.getLogger(__name__)

_IN_MEMORY = "sqlite+aiosqlite://"
_ONE = text("SELECT 1")
_JOIN_SECONDS = 10.0


def warm_up() -> None:
    """Open, read, write and close an in-memory store; leaves no thread behind.

    Only the SQLite code is run: on PostgreSQL a role's first connection costs its own
    pages either way, and the supervisor should not need the database to start.
    """
    before = set(threading.enumerate())
    asyncio.run(_round_trip())
    for thread in set(threading.enumerate()) - before:
        # aiosqlite's connection threads end just after the close they answered.
        thread.join(timeout=_JOIN_SECONDS)
        if thread.is_alive():  # not seen; the fork that follows would copy it stopped
            log.warning("store warm-up: thread %s did not end", thread.name)


async def _round_trip() -> None:
    store = Store(url=_IN_MEMORY)
    await store.open(migrate=False)
    try:
        async with store.read() as conn:
            await conn.execute(_ONE)
        await store.transact(_select_one)
        await store.write_one(_select_one)
    finally:
        await store.close()


def _select_one(conn: Connection) -> None:
    conn.execute(_ONE)
