"""group_tasks on a real PostgreSQL: leases judged by the database's clock, a caller
giving up only on an expired lease, and old ended tasks deleted."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import pytest

from core.group.roster import Roster
from core.group.task_rows import GroupTasks
from core.store.engine import Store

pytestmark = pytest.mark.postgres

DAY = 86_400.0


@pytest.fixture
async def store(pg_url: str) -> AsyncIterator[Store]:
    opened = Store(url=pg_url)
    await opened.open(migrate=False)
    await Roster(opened, expire_after=2.0).ensure_tables()
    try:
        yield opened
    finally:
        await opened.close()


async def _add(
    store: Store, task_id: str, *, lease: float, status: str, age: float, peer: str = "work"
) -> None:
    at = time.time() - age
    row = {
        "id": task_id,
        "caller": "home",
        "peer": peer,
        "prompt": "p",
        "description": "",
        "mode": "sync",
        "status": status,
        "created_at": at,
        "updated_at": at,
    }
    await store.transact(lambda conn: GroupTasks.insert_in(conn, row, lease=lease))


async def test_leases_expiry_and_pruning(store: Store) -> None:
    tasks = GroupTasks(store=store)
    await _add(store, "a" * 16, lease=60.0, status="running", age=0)
    await _add(store, "b" * 16, lease=-1.0, status="running", age=0)
    fresh, stale = (await tasks.get("a" * 16)), (await tasks.get("b" * 16))
    assert fresh is not None and stale is not None
    assert (fresh.expired, stale.expired) == (False, True)

    failed = {"status": "failed", "error": "lease ran out"}
    assert not await tasks.change(fresh, failed, when=("running",), by="home", expired_only=True)
    assert await tasks.change(stale, failed, when=("running",), by="home", expired_only=True)
    # the peer renews only what it still runs: the failed one stays failed
    assert await tasks.renew("work", 60.0) == 1

    await _add(store, "c" * 16, lease=60.0, status="done", age=40 * DAY)
    await _add(store, "d" * 16, lease=60.0, status="running", age=40 * DAY)
    assert await tasks.prune("work", 30) == 1
    left = await tasks.many(["a" * 16, "b" * 16, "c" * 16, "d" * 16])
    assert {i[0]: t.status for i, t in left.items()} == {
        "a": "running",
        "b": "failed",
        "d": "running",
    }
    # a task for a peer that never came back: its caller deletes it in the end
    await _add(store, "e" * 16, lease=60.0, status="failed", age=40 * DAY, peer="ghost")
    assert await tasks.prune("home", 30) == 1
    assert await tasks.get("e" * 16) is None
