"""The peer's side of ``group_tasks``: it takes only tasks sent to its own name (never
those of another assistant claiming it), and a task's answer is bounded on both sides
(the peer cuts what it writes, the caller what it reads: a peer is another program)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest
from sqlalchemy import Connection

from core.bus.sql import SqlBus
from core.events import EventLog
from core.group.peer_tasks import MAX_ANSWER_CHARS, PeerTaskService, group_session_key
from core.group.roster import Roster, Snapshot
from core.group.settle import Settler
from core.group.task_rows import GroupTasks
from core.messages import Delivery, OutboundMessage
from core.store.config import StoreConfig
from core.store.engine import Store
from core.tasks.repository import TaskRepository
from core.tools.subagents_config import SubagentsConfig
from tests.integration.schema_stores import schema_stores

pytestmark = pytest.mark.postgres

HUGE = "x" * (MAX_ANSWER_CHARS * 5)


@pytest.fixture
async def stores(pg_url: str) -> AsyncIterator[dict[str, Store]]:
    async with schema_stores(pg_url) as opened:
        await Roster(opened["home"], expire_after=60).ensure_tables()
        yield opened


async def _queue(
    store: Store, task_id: str, status: str = "running", caller: str = "home", age: float = 0.0
) -> None:
    now = time.time() - age
    record = {
        "id": task_id,
        "owner_key": "cli:default",
        "child_key": group_session_key(caller, task_id),
        "agent_type": "peer:work",
        "description": "d",
        "prompt": "p",
        "mode": "sync",
        "memory_mode": "handoff",
        "status": "running",
        "delivery": Delivery(channel="cli").model_dump_json(),
        "created_at": now,
        "updated_at": now,
    }
    row = {
        "id": task_id,
        "caller": caller,
        "peer": "work",
        "prompt": "p",
        "mode": "sync",
        "status": status,
        "created_at": now,
        "updated_at": now,
    }

    def job(conn: Connection) -> None:
        TaskRepository.insert_in(conn, record)
        GroupTasks.insert_in(conn, row, lease=60.0)

    await store.transact(job)


def _peer(store: Store, *, max_running: int = 4) -> PeerTaskService:
    return PeerTaskService(
        store=store,
        bus=SqlBus(store=store),
        events=EventLog(store=store),
        tasks=GroupTasks(store=store),
        roster=Roster(store, expire_after=60),
        name="work",
        accept_from=["home", "lab"],
        max_running_per_caller=max_running,
        lease=60.0,
        renew_every=30.0,
        retention_days=30.0,
    )


def _member(schema: str) -> Snapshot:
    return Snapshot(
        name="work",
        description="",
        identity="",
        version="1",
        capabilities={},
        host="h",
        store_schema=schema,
        started_at=datetime.now(UTC),
    )


async def test_tasks_for_a_name_another_assistant_holds_are_left_queued(
    stores: dict[str, Store],
) -> None:
    home, work = stores["home"], stores["work"]
    task_id = "c" * 16
    await _queue(home, task_id, status="queued")
    await Roster(home, expire_after=60).announce(_member("home"), starting=True)
    # another assistant (schema home) holds the name "work": this one takes nothing
    assert await _peer(work).take_queued() == 0
    row = await GroupTasks(store=work).get(task_id)
    assert row is not None and row.status == "queued"
    await Roster(home, expire_after=60).leave("work")
    assert await Roster(home, expire_after=60).forget("work") == "forgotten"
    await Roster(work, expire_after=60).announce(_member("work"), starting=True)
    assert await _peer(work).take_queued() == 1
    row = await GroupTasks(store=work).get(task_id)
    assert row is not None and row.status == "running"


async def test_the_peer_writes_and_the_caller_reads_a_bounded_answer(
    stores: dict[str, Store],
) -> None:
    home, work = stores["home"], stores["work"]
    tasks = GroupTasks(store=work)
    peer = _peer(work)
    task_id = "a" * 16
    await _queue(home, task_id)
    await peer.settle(
        OutboundMessage(
            id="r1",
            inbound_id=f"group-{task_id}",
            session_key=group_session_key("home", task_id),
            delivery=Delivery(channel="group", chat_id=task_id),
            text=HUGE,
        )
    )
    written = await tasks.get(task_id)
    assert written is not None and written.status == "done" and written.result is not None
    assert len(written.result) < MAX_ANSWER_CHARS + 100
    assert written.result.endswith(f"[... {len(HUGE) - MAX_ANSWER_CHARS} more characters cut]")

    # Whatever another program wrote there, the caller keeps a bounded text.
    other = "b" * 16
    await _queue(home, other)
    row = await tasks.get(other)
    assert row is not None
    assert await tasks.change(row, {"status": "done", "result": HUGE}, when=["running"], by="work")
    settler = Settler(
        store=home,
        bus=SqlBus(store=home),
        events=EventLog(store=home),
        tasks=GroupTasks(store=home),
        subagents=SubagentsConfig(),
        clock=time.time,
    )
    record = await settler.repo.get(other)
    assert record is not None
    ended = await settler.check(record)
    assert ended is not None and ended[0] == "completed"
    assert len(ended[1]) < MAX_ANSWER_CHARS + 100
    kept = await settler.repo.get(other)
    assert kept is not None and kept.result is not None
    assert len(kept.result) < MAX_ANSWER_CHARS + 100


async def test_two_replicas_of_the_peer_take_a_task_once(
    stores: dict[str, Store], pg_url: str
) -> None:
    home, work = stores["home"], stores["work"]
    await Roster(work, expire_after=60).announce(_member("work"), starting=True)
    task_id = "d" * 16
    await _queue(home, task_id, status="queued")
    replica = Store(url=pg_url, config=StoreConfig(schema="work"))
    await replica.open(migrate=False)
    try:
        taken = await asyncio.gather(_peer(work).take_queued(), _peer(replica).take_queued())
    finally:
        await replica.close()
    assert 1 in taken  # one or both took it: the bus and the row let it through once
    claims = await SqlBus(store=work).claim(owner="t", limit=10, lease_seconds=30)
    assert [c.message.id for c in claims] == [f"group-{task_id}"]
    row = await GroupTasks(store=work).get(task_id)
    assert row is not None and row.status == "running"


async def test_a_busy_caller_waits_its_turn_and_never_hides_the_others(
    stores: dict[str, Store],
) -> None:
    home, work = stores["home"], stores["work"]
    await Roster(work, expire_after=60).announce(_member("work"), starting=True)
    flood = [f"{n:016x}" for n in range(1, 61)]  # more than one look takes (50)
    for n, task_id in enumerate(flood):
        await _queue(home, task_id, status="queued", age=120 - n)  # older than lab's
    await _queue(home, "f" * 16, status="queued", caller="lab")
    tasks = GroupTasks(store=work)
    peer = _peer(work, max_running=2)

    await peer.take_queued()
    state = await tasks.many([*flood, "f" * 16])
    assert [t for t in flood if state[t].status == "running"] == flood[:2]
    assert state["f" * 16].status == "running"  # lab's task, behind 60 of home's
    await peer.take_queued()  # home still runs two: nothing more of home's starts
    state = await tasks.many(flood)
    assert sum(t.status == "running" for t in state.values()) == 2

    done = {"status": "done", "result": "ok"}
    assert await tasks.change(state[flood[0]], done, when=("running",), by="work")
    await peer.take_queued()
    state = await tasks.many(flood)
    assert [t for t in flood if state[t].status == "running"] == [flood[1], flood[2]]
