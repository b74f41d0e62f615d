"""Reads are Core statements on a connection: serving them never builds the ORM's
mapper configuration or a session (each costs every role process MiBs)."""

from __future__ import annotations

import asyncio
import sys

from tests.daemon_env import REPO, daemon_env

# A fresh interpreter: this test process's other tests may have used the ORM.
_CHILD = """
import asyncio, sys

from core.bus.sql import SqlBus
from core.events import EventLog
from core.sessions import SessionStore
from core.store.engine import Store
from core.store.leases import Leases
from core.store.models import SessionRow
from core.tasks.repository import TaskRepository


async def main(url: str) -> None:
    store = Store(url=url)
    await store.open()
    try:
        sessions = SessionStore(store=store)
        await store.transact(lambda conn: sessions.ensure_in(conn, "cli:a", "cli"))
        assert (await sessions.get("cli:a")) is not None
        await sessions.count()
        await sessions.list_sessions()
        await sessions.all_history("cli:a")
        await sessions.unread("cli:a")
        events = EventLog(store=store)
        await events.list("cli:a")
        await events.newest_id()
        await events.tail(0, types=["turn.start"], limit=10)
        tasks = TaskRepository(store=store)
        await tasks.list()
        await tasks.find("t1")
        await Leases(store=store).holder("scheduler")
        bus = SqlBus(store=store)
        await bus.queue_counts()
        await bus.message_status("m1")
        await bus.due_outbound("cli", limit=10)
    finally:
        await store.close()
    print("mappers configured:", SessionRow.__mapper__.configured)


asyncio.run(main(sys.argv[1]))
"""


async def test_reads_configure_no_orm_mappers(store_url: str) -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _CHILD, store_url,
        cwd=REPO, env=daemon_env(), stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    assert out.decode().strip() == "mappers configured: False"
