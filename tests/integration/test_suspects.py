"""Suspects: a message whose attempt was interrupted is retried alone (poison isolation).

A worker's death is played here by a claim of an owner that is then released as dead
(what a restarted runtime does for the leases of a killed process); the real kill of
a worker process is in ``tests/e2e/test_lifecycle.py``.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from sqlalchemy import select

from core.agent.config import AgentConfig
from core.bus.sql import SqlBus
from core.bus.tables import InboundRow
from core.providers.base import ChatRequest
from core.providers.scripted import FunctionProvider
from core.store.engine import Store
from tests.integration.harness import inbound, running_core
from tests.waiting import eventually


async def _die_holding(bus: SqlBus, count: int) -> None:
    """A worker claims ``count`` messages and dies with them."""
    claimed = await bus.claim(owner="gone", limit=count, lease_seconds=600)
    assert len(claimed) == count
    assert await bus.release_dead_owners(is_dead=lambda o: o == "gone") == count


async def _attempts(store: Store) -> dict[str, int]:
    async with store.read() as conn:
        rows = (await conn.execute(select(InboundRow.id, InboundRow.attempts))).all()
    return {message_id: attempts for message_id, attempts in rows}


async def test_suspects_are_claimed_one_by_one_and_block_only_their_session(
    store: Store,
) -> None:
    bus = SqlBus(store=store)
    a1, b1 = inbound("cli:a", "a1"), inbound("cli:b", "b1")
    for m in (a1, b1):
        await bus.publish_inbound(m)
    await _die_holding(bus, 2)
    a2, c1 = inbound("cli:a", "a2"), inbound("cli:c", "c1")
    for m in (a2, c1):
        await bus.publish_inbound(m)

    assert await bus.suspect_waiting()
    # The normal claim takes only the session without a suspect: a2 waits behind a1.
    claimed = await bus.claim(owner="w", limit=10, lease_seconds=60)
    assert [c.message.id for c in claimed] == [c1.id]
    first = await bus.claim_suspect(owner="w", lease_seconds=60)
    assert first is not None and (first.message.id, first.attempt) == (a1.id, 2)
    second = await bus.claim_suspect(owner="w2", lease_seconds=60)
    assert second is not None and second.message.id == b1.id
    assert await bus.claim_suspect(owner="w3", lease_seconds=60) is None
    assert not await bus.suspect_waiting()
    assert await bus.claim(owner="w", limit=10, lease_seconds=60) == []  # a is busy

    assert await bus.settle(a1.id, owner="w", reply=None)
    # a1 settled: its session is free of suspects again, a2 is an ordinary message.
    (next_of_a,) = await bus.claim(owner="w", limit=10, lease_seconds=60)
    assert (next_of_a.message.id, next_of_a.attempt) == (a2.id, 1)


async def test_a_graceful_release_keeps_a_suspect_a_suspect(store: Store) -> None:
    bus = SqlBus(store=store)
    m = inbound("cli:a", "m")
    await bus.publish_inbound(m)
    await _die_holding(bus, 1)
    claim = await bus.claim_suspect(owner="w", lease_seconds=60)
    assert claim is not None and claim.attempt == 2
    await bus.release([m.id], owner="w")  # shutdown: the attempt is given back
    assert await bus.claim(owner="w", limit=10, lease_seconds=60) == []
    again = await bus.claim_suspect(owner="w", lease_seconds=60)
    assert again is not None and again.attempt == 2


async def test_suspects_run_alone_and_fresh_messages_are_answered_too(
    store_url: str, tmp_path: Path
) -> None:
    store = Store(url=store_url)
    await store.open()
    bus = SqlBus(store=store)
    suspects = [inbound(f"cli:s{i}", f"suspect {i}") for i in range(3)]
    for m in suspects:
        await bus.publish_inbound(m)
    await _die_holding(bus, 3)  # their worker died with all three
    fresh = [inbound(f"cli:f{i}", f"fresh {i}") for i in range(6)]
    for m in fresh:
        await bus.publish_inbound(m)
    await store.close()

    running: set[str] = set()
    beside_a_suspect: list[set[str]] = []

    async def reply(request: ChatRequest) -> str:
        text = request.messages[-1].content
        running.add(text)
        if len(running) > 1 and any(t.startswith("suspect") for t in running):
            beside_a_suspect.append(set(running))
        await asyncio.sleep(0.05)
        running.discard(text)
        return f"echo: {text}"

    async with running_core(
        store_url=store_url, workspace=tmp_path / "ws", provider=FunctionProvider(reply)
    ) as (app, replies):
        out = await replies.wait([m.id for m in suspects + fresh])
        attempts = await _attempts(app.store)
    assert [o.text for o in out] == [f"echo: {m.text}" for m in suspects + fresh]
    assert all(o.kind == "reply" for o in out)
    assert beside_a_suspect == []
    # Charged once for the crash they shared, once for the run that answered them.
    assert {m.id: attempts[m.id] for m in suspects} == {m.id: 2 for m in suspects}
    assert {m.id: attempts[m.id] for m in fresh} == {m.id: 1 for m in fresh}


async def test_a_busy_runtime_drains_then_runs_a_suspect_before_new_work(
    store_url: str, tmp_path: Path
) -> None:
    store = Store(url=store_url)
    await store.open()
    bus = SqlBus(store=store)
    suspect = inbound("cli:s", "suspect")
    await bus.publish_inbound(suspect)
    # Held by a worker that looks alive until the test says otherwise.
    assert await bus.claim(owner="gone", limit=1, lease_seconds=600)
    await store.close()

    release_long = asyncio.Event()
    spans: dict[str, tuple[float, float]] = {}

    async def reply(request: ChatRequest) -> str:
        text = request.messages[-1].content
        began = time.monotonic()
        if text == "long":
            await release_long.wait()
        else:
            await asyncio.sleep(0.05)
        spans[text] = (began, time.monotonic())
        return f"echo: {text}"

    agent = AgentConfig(poll_interval=0.1)
    async with running_core(
        store_url=store_url,
        workspace=tmp_path / "ws",
        provider=FunctionProvider(reply),
        agent=agent,
    ) as (app, replies):
        long = inbound("cli:long", "long")
        await app.bus.publish_inbound(long)
        await eventually(lambda: "long" in spans or app.runtime.busy_sessions == 1)
        assert await app.bus.release_dead_owners(is_dead=lambda o: o == "gone") == 1
        # The runtime notices the suspect within a poll and stops taking new work.
        await eventually(lambda: app.runtime.draining, what="draining")
        later = inbound("cli:later", "later")
        await app.bus.publish_inbound(later)
        release_long.set()
        await replies.wait([long.id, suspect.id, later.id])
    assert spans["suspect"][0] >= spans["long"][1]  # alone: after the running turn
    assert spans["later"][0] >= spans["suspect"][1]  # and before the newer message
