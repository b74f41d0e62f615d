"""The bus contract: the same suite on SQLite (a real file) and on PostgreSQL.

Two `Store`s on one database, each with its own `SqlBus` and wake-ups (Unix datagram
sockets on SQLite, ``LISTEN``/``NOTIFY`` on PostgreSQL), stand for two processes; the
crash tests kill a real claimer process. PostgreSQL is the conftest's `store_url`:
skipped with a reason when unreachable, a failure under ``CI=true``.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event

from core.bus.base import Claim
from core.bus.sql import SqlBus
from core.bus.wake_pg import PgWakeups
from core.bus.wake_socket import SocketWakeups
from core.bus.wakeups import WakeupService
from core.messages import Delivery, InboundMessage, OutboundMessage
from core.store.engine import Store
from tests.waiting import eventually

ROOT = Path(__file__).resolve().parents[2]
WAKE_WITHIN = 10.0
"""Seconds a wake-up may take before the test fails (the waits themselves last 60 s)."""


class Clock:
    """Now for one side's bus: the wall clock, moved on by ``skip``."""

    def __init__(self) -> None:
        self.ahead = 0.0

    def __call__(self) -> float:
        return time.time() + self.ahead


@dataclass
class Side:
    """One process's view: its store connections, its bus, its wake-ups."""

    store: Store
    bus: SqlBus
    clock: Clock


@pytest.fixture
async def sides(store_url: str, tmp_path: Path) -> AsyncIterator[tuple[Side, Side]]:
    async with AsyncExitStack() as stack:
        made = []
        for _ in range(2):
            store = Store(url=store_url)
            await store.open()
            stack.push_async_callback(store.close)
            wakeups: WakeupService = (
                SocketWakeups(tmp_path / "wake") if store.is_sqlite else PgWakeups(store_url)
            )
            await wakeups.start()
            stack.push_async_callback(wakeups.stop)
            clock = Clock()
            bus = SqlBus(store=store, clock=clock)
            bus.connect(wakeups)
            made.append(Side(store, bus, clock))
        yield made[0], made[1]


def message(session: str, text: str, *, event_id: str | None = None) -> InboundMessage:
    return InboundMessage(
        session_key=session,
        text=text,
        delivery=Delivery(channel="cli", chat_id=session),
        event_id=event_id,
    )


def texts(claims: list[Claim]) -> list[str]:
    return [c.message.text for c in claims]


async def test_a_published_message_is_claimed_once_and_settled(
    sides: tuple[Side, Side],
) -> None:
    a, b = sides
    sent = message("cli:a", "hello")

    published = await a.bus.publish_inbound(sent)

    assert (published.message_id, published.duplicate) == (sent.id, False)
    (claim,) = await b.bus.claim(owner="b", limit=10, lease_seconds=60)
    assert claim.message == sent and claim.attempt == 1
    assert await a.bus.claim(owner="a", limit=10, lease_seconds=60) == []
    assert (await a.bus.message_states([sent.id])) == {sent.id: "claimed"}
    assert not await a.bus.settle(sent.id, owner="a", reply=None)  # not a's claim
    assert await b.bus.settle(sent.id, owner="b", reply=OutboundMessage.answering(sent, "hi"))
    status = await a.bus.message_status(sent.id)
    assert status is not None and status.status == "done"
    assert status.reply is not None and status.reply.text == "hi"
    assert not await b.bus.settle(sent.id, owner="b", reply=None)  # settled already
    assert await b.bus.claim(owner="b", limit=10, lease_seconds=60) == []


async def test_a_repeated_message_is_stored_once(sides: tuple[Side, Side]) -> None:
    a, b = sides
    sent = message("cli:a", "once", event_id="ev-1")
    retried = message("cli:a", "once again", event_id="ev-1")  # a platform's retry
    plain = message("cli:b", "no event id")

    first = await a.bus.publish_inbound(sent)
    same_event = await b.bus.publish_inbound(retried)
    results = [await side.bus.publish_inbound(plain) for side in (a, b, a)]

    assert not first.duplicate
    assert (same_event.message_id, same_event.duplicate) == (sent.id, True)
    assert [(r.message_id, r.duplicate) for r in results] == [
        (plain.id, False),
        (plain.id, True),
        (plain.id, True),
    ]
    claimed = await a.bus.claim(owner="a", limit=10, lease_seconds=60)
    assert sorted(texts(claimed)) == ["no event id", "once"]
    assert await a.bus.claim(owner="a", limit=10, lease_seconds=60) == []
    assert (await a.bus.message_states([sent.id, retried.id])) == {sent.id: "claimed"}


async def test_one_message_per_session_at_a_time_in_publish_order(
    sides: tuple[Side, Side],
) -> None:
    a, b = sides
    for side, text in ((a, "a1"), (b, "a2"), (a, "a3")):
        await side.bus.publish_inbound(message("cli:a", text))
    await b.bus.publish_inbound(message("cli:b", "b1"))

    # Both processes claim at once: each session's head goes to exactly one of them.
    first, second = await asyncio.gather(
        a.bus.claim(owner="a", limit=10, lease_seconds=60),
        b.bus.claim(owner="b", limit=10, lease_seconds=60),
    )
    assert sorted(texts(first) + texts(second)) == ["a1", "b1"]
    held = {c.message.text: (side, name) for side, name, claims in
            ((a, "a", first), (b, "b", second)) for c in claims}  # fmt: skip
    assert await a.bus.claim(owner="a", limit=10, lease_seconds=60) == []

    order = []
    head: Claim | None = next(c for c in first + second if c.message.text == "a1")
    while head is not None:
        order.append(head.message.text)
        side, name = held.get(head.message.text, (b, "b"))
        assert await side.bus.settle(head.message.id, owner=name, reply=None)
        taken = await b.bus.claim(owner="b", limit=10, lease_seconds=60)
        assert len(taken) <= 1, texts(taken)
        head = taken[0] if taken else None
    assert order == ["a1", "a2", "a3"]


_CLAIMER = """
import asyncio, sys
from core.bus.owner import make_owner
from core.bus.sql import SqlBus
from core.store.engine import Store

async def main(url: str) -> None:
    store = Store(url=url)
    await store.open()
    claims = await SqlBus(store=store).claim(owner=make_owner(), limit=10, lease_seconds=600)
    print(" ".join(c.message.id for c in claims), flush=True)
    await asyncio.Event().wait()

asyncio.run(main(sys.argv[1]))
"""


async def _claim_in_a_process_and_kill_it(url: str) -> list[str]:
    """The ids a separate process claimed (leased for 600 s) before it was killed -9."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _CLAIMER, url, env=env, stdout=asyncio.subprocess.PIPE
    )
    try:
        assert proc.stdout is not None
        async with asyncio.timeout(60):
            line = await proc.stdout.readline()
    finally:
        proc.kill()
        await proc.wait()
    return line.decode().split()


@pytest.mark.parametrize("recovery", ["dead owner released", "lease expired"])
async def test_a_crashed_claimers_message_is_claimed_again_before_later_ones(
    sides: tuple[Side, Side], store_url: str, recovery: str
) -> None:
    a, b = sides
    first, later = message("cli:a", "first"), message("cli:a", "later")
    await a.bus.publish_inbound(first)
    await a.bus.publish_inbound(later)

    assert await _claim_in_a_process_and_kill_it(store_url) == [first.id]

    # The lease still runs: nothing of that session is claimable.
    assert await b.bus.claim(owner="b", limit=10, lease_seconds=60) == []
    assert await b.bus.claim_suspect(owner="b", lease_seconds=60) is None
    if recovery == "dead owner released":
        assert await b.bus.release_dead_owners() == 1
    else:
        b.clock.ahead = 601.0
    # Interrupted once: it runs again alone, and its session's later message waits.
    assert await b.bus.claim(owner="b", limit=10, lease_seconds=60) == []
    again = await b.bus.claim_suspect(owner="b", lease_seconds=60)
    assert again is not None and again.message == first and again.attempt == 2
    assert await b.bus.settle(first.id, owner="b", reply=None)
    (next_one,) = await b.bus.claim(owner="b", limit=10, lease_seconds=60)
    assert next_one.message == later and next_one.attempt == 1


async def test_a_live_lease_on_another_host_is_never_taken_early(
    sides: tuple[Side, Side],
) -> None:
    a, b = sides
    sent = message("cli:a", "far away")
    await a.bus.publish_inbound(sent)
    (claim,) = await a.bus.claim(owner="elsewhere/1/1", limit=1, lease_seconds=30)
    assert claim.message == sent

    b.clock.ahead = 29.0
    assert await b.bus.release_dead_owners() == 0  # not judged from this host
    assert await b.bus.claim_suspect(owner="b", lease_seconds=60) is None
    assert not await b.bus.settle(sent.id, owner="b", reply=None)
    b.clock.ahead = 31.0
    again = await b.bus.claim_suspect(owner="b", lease_seconds=60)
    assert again is not None and again.message == sent and again.attempt == 2
    assert not await a.bus.settle(sent.id, owner="elsewhere/1/1", reply=None)  # lost it


async def test_a_reply_is_delivered_once_by_one_of_the_senders(
    sides: tuple[Side, Side],
) -> None:
    a, b = sides
    sent = message("cli:a", "question")
    await a.bus.publish_inbound(sent)
    (claim,) = await a.bus.claim(owner="a", limit=1, lease_seconds=60)
    reply = OutboundMessage.answering(claim.message, "answer")
    assert await a.bus.settle(sent.id, owner="a", reply=reply)

    waited = await b.bus.wait_reply(sent.id, timeout=30)
    assert waited is not None and (waited.id, waited.text) == (reply.id, "answer")
    taken = await b.bus.due_outbound("cli", limit=10, lease_seconds=60)
    assert [(d.message.id, d.failed_attempts) for d in taken] == [(reply.id, 0)]
    assert await a.bus.due_outbound("cli", limit=10, lease_seconds=60) == []  # leased to b
    assert await a.bus.due_outbound("slack", limit=10) == []
    assert not await a.bus.publish_outbound(reply)  # stored once per id
    assert await b.bus.mark_delivered(reply.id)
    assert not await a.bus.mark_delivered(reply.id)
    b.clock.ahead = a.clock.ahead = 120.0  # past the lease: still nothing due
    assert await a.bus.due_outbound("cli", limit=10) == []


async def test_a_failed_delivery_is_due_again_after_its_backoff(
    sides: tuple[Side, Side],
) -> None:
    a, b = sides
    reply = OutboundMessage.answering(message("cli:a", "q"), "retry me")
    assert await a.bus.publish_outbound(reply)

    (due,) = await b.bus.due_outbound("cli", limit=10, lease_seconds=60)
    await b.bus.mark_failed(due.message.id, error="platform down", retry_in=30)
    a.clock.ahead = 29.0
    assert await a.bus.due_outbound("cli", limit=10) == []
    a.clock.ahead = 31.0
    (again,) = await a.bus.due_outbound("cli", limit=10, lease_seconds=60)
    assert (again.message.id, again.failed_attempts) == (reply.id, 1)
    await a.bus.mark_failed(reply.id, error="gone", retry_in=None)
    a.clock.ahead = 10_000.0
    assert await a.bus.due_outbound("cli", limit=10) == []
    assert not await a.bus.mark_delivered(reply.id)


async def test_a_publish_wakes_the_claimers_of_the_other_process(
    sides: tuple[Side, Side],
) -> None:
    a, b = sides
    woken = asyncio.create_task(b.bus.wait_inbound(60))

    await a.bus.publish_inbound(message("cli:a", "wake up"))

    async with asyncio.timeout(WAKE_WITHIN):
        await woken
    assert texts(await b.bus.claim(owner="b", limit=10, lease_seconds=60)) == ["wake up"]


async def test_a_settled_reply_wakes_its_channels_sender_in_the_other_process(
    sides: tuple[Side, Side],
) -> None:
    a, b = sides
    sent = message("cli:a", "q")
    await a.bus.publish_inbound(sent)
    assert texts(await a.bus.claim(owner="a", limit=1, lease_seconds=60)) == ["q"]
    other_channel = asyncio.create_task(b.bus.wait_outbound("slack", 60))
    woken = asyncio.create_task(b.bus.wait_outbound("cli", 60))

    assert await a.bus.settle(sent.id, owner="a", reply=OutboundMessage.answering(sent, "r"))

    async with asyncio.timeout(WAKE_WITHIN):
        await woken
    assert not other_channel.done()
    other_channel.cancel()
    assert [d.message.text for d in await b.bus.due_outbound("cli", limit=10)] == ["r"]


async def test_a_settled_reply_wakes_its_waiter_in_the_other_process(
    sides: tuple[Side, Side],
) -> None:
    a, b = sides
    sent = message("cli:a", "q")
    await b.bus.publish_inbound(sent)
    b.bus.reply_poll_interval = 60.0  # only the wake-up can end the wait in time
    reads: list[str] = []

    def read(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if "FROM outbound" in statement:
            reads.append(statement)

    event.listen(b.store.engine.sync_engine, "after_cursor_execute", read)
    waiter = asyncio.create_task(b.bus.wait_reply(sent.id, timeout=60))
    await eventually(lambda: bool(reads), timeout=WAKE_WITHIN, what="the waiter read the store")
    (claim,) = await a.bus.claim(owner="a", limit=1, lease_seconds=60)

    assert await a.bus.settle(
        claim.message.id, owner="a", reply=OutboundMessage.answering(sent, "r")
    )

    async with asyncio.timeout(WAKE_WITHIN):
        woken = await waiter
    assert woken is not None and woken.text == "r"
