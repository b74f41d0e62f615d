"""What several processes share through the database: leased delivery, leases, the leader.

Two `Store`s on one database stand for two processes (each has its own connections
and, on SQLite, its own writer); the same code runs on SQLite and PostgreSQL.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import AsyncIterator

import pytest
from sqlalchemy import select

from core.bus.delivery import DeliveryWorker
from core.bus.sql import SqlBus
from core.bus.tables import OutboundRow
from core.errors import RetryLater
from core.messages import Delivery, InboundMessage, OutboundMessage
from core.scheduling.leader import LEADER_LEASE, SchedulerLeader
from core.store.engine import Store
from core.store.leases import Leases
from tests.waiting import eventually


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def stores(store_url: str) -> AsyncIterator[tuple[Store, Store]]:
    one, two = Store(url=store_url), Store(url=store_url)
    await one.open()
    await two.open()
    try:
        yield one, two
    finally:
        await one.close()
        await two.close()


async def _replies(bus: SqlBus, count: int) -> list[str]:
    ids = []
    for i in range(count):
        message = InboundMessage(
            session_key=f"cli:s{i}", text=f"m{i}", delivery=Delivery(channel="cli", chat_id="c")
        )
        await bus.publish_inbound(message)
        ids.append(message.id)
    claims = await bus.claim(owner="w", limit=count, lease_seconds=60)
    assert len(claims) == count
    for claim in claims:
        reply = OutboundMessage.answering(claim.message, f"re {claim.message.text}")
        assert await bus.settle(claim.message.id, owner="w", reply=reply)
    return ids


async def test_two_processes_delivering_one_channel_send_each_reply_once(
    stores: tuple[Store, Store],
) -> None:
    buses = [SqlBus(store=s) for s in stores]
    sent: Counter[str] = Counter()
    sending: Counter[str] = Counter()

    async def send(message: OutboundMessage) -> None:
        sending[message.inbound_id] += 1
        # A slow platform (the behaviour under test): both workers are mid-send at once.
        await asyncio.sleep(0.01)
        sent[message.inbound_id] += 1

    def settled() -> bool:
        return sum(sent.values()) >= 40 and sending == sent

    workers = [DeliveryWorker(bus=b, channel="cli", send=send, poll_interval=0.05) for b in buses]
    for worker in workers:
        worker.start()
    try:
        ids = await _replies(buses[0], 40)
        await eventually(settled, timeout=60, what="all delivered, no send under way")
        # Every reply is marked sent, so no later poll hands one out again; a reply
        # published now is sent only by a poll after those marks.
        assert await buses[1].due_outbound("cli", limit=100) == []
        (marker,) = await _replies(buses[0], 1)
        await eventually(lambda: sent[marker] == 1 and sending == sent, timeout=60)
    finally:
        for worker in workers:
            await worker.stop()
    assert sent == Counter(dict.fromkeys([*ids, marker], 1))
    assert await buses[1].due_outbound("cli", limit=100) == []


async def test_a_leased_reply_comes_back_when_its_sender_died(stores: tuple[Store, Store]) -> None:
    clock = Clock()
    one, two = SqlBus(store=stores[0], clock=clock), SqlBus(store=stores[1], clock=clock)
    (mid,) = await _replies(one, 1)
    (taken,) = await one.due_outbound("cli", limit=10, lease_seconds=30)
    assert taken.message.inbound_id == mid
    assert await two.due_outbound("cli", limit=10, lease_seconds=30) == []
    clock.now += 31  # the sender died mid-send: its lease ran out
    (again,) = await two.due_outbound("cli", limit=10, lease_seconds=30)
    assert again.message.id == taken.message.id
    assert await two.mark_delivered(again.message.id)
    assert not await one.mark_delivered(taken.message.id)  # marked once


async def test_a_lease_has_one_holder_and_is_taken_over_when_it_runs_out(
    stores: tuple[Store, Store],
) -> None:
    clock = Clock()
    a, b = Leases(store=stores[0], clock=clock), Leases(store=stores[1], clock=clock)
    assert await a.acquire("x", "A", seconds=10)
    assert not await b.acquire("x", "B", seconds=10)
    clock.now += 9
    assert await a.acquire("x", "A", seconds=10)  # renewed
    clock.now += 9
    assert not await b.acquire("x", "B", seconds=10)
    holder = await b.holder("x")
    assert holder is not None and holder.owner == "A"
    clock.now += 2  # A stopped renewing 11 s ago
    assert await b.acquire("x", "B", seconds=10)
    assert not await a.acquire("x", "A", seconds=10)
    assert await a.acquire("x", "A", seconds=10, is_dead=lambda owner: owner == "B")
    await a.release("x", "A")
    assert await b.holder("x") is None
    assert await b.acquire("x", "B", seconds=10)


async def test_contenders_racing_for_a_free_lease_get_one_holder(
    stores: tuple[Store, Store],
) -> None:
    leases = [Leases(store=stores[i % 2]) for i in range(6)]
    won = await asyncio.gather(
        *(lease.acquire("race", f"owner{i}", seconds=30) for i, lease in enumerate(leases))
    )
    assert sum(won) == 1


async def test_the_leader_stops_firing_elsewhere_and_another_takes_over(
    stores: tuple[Store, Store],
) -> None:
    log: list[str] = []
    renewals: Counter[str] = Counter()
    tries: Counter[str] = Counter()

    def leader(name: str, store: Store) -> SchedulerLeader:
        async def lead() -> None:
            log.append(f"{name} leads")

        async def follow() -> None:
            log.append(f"{name} follows")

        async def resync() -> None:  # each renewal of a held lease
            renewals[name] += 1

        def clock() -> float:  # read once per attempt to take or renew the lease
            tries[name] += 1
            return time.time()

        return SchedulerLeader(
            leases=Leases(store=store, clock=clock),
            owner=name,
            seconds=1.5,
            lead=lead,
            follow=follow,
            resync=resync,
        )

    first, second = leader("A", stores[0]), leader("B", stores[1])
    first.start()
    await eventually(lambda: first.leading, timeout=30)
    second.start()
    try:
        renewed = renewals["A"]
        # B keeps trying while A renews: two attempts of B, each answered "held by A"
        await eventually(lambda: tries["B"] >= 2 and renewals["A"] >= renewed + 2, timeout=30)
        assert not second.leading and log == ["A leads"]
        await first._task.stop()  # A dies: no release, no renewal
        await eventually(lambda: second.leading, timeout=30, what="B took over")
        assert log == ["A leads", "B leads"]
        holder = await Leases(store=stores[0]).holder(LEADER_LEASE)
        assert holder is not None and holder.owner == "B"
    finally:
        await second.stop()
    assert log[-1] == "B follows"
    assert await Leases(store=stores[0]).holder(LEADER_LEASE) is None


async def test_a_reply_queued_by_another_process_is_delivered_once(
    stores: tuple[Store, Store],
) -> None:
    scheduler, front = SqlBus(store=stores[0]), SqlBus(store=stores[1])
    message = InboundMessage(
        session_key="cli:hb", text="check-in", delivery=Delivery(channel="cli", chat_id="hb")
    )
    forwarded = OutboundMessage.answering(message, "something needs you")
    assert await scheduler.publish_outbound(forwarded)
    assert not await scheduler.publish_outbound(forwarded)  # once per id
    sent: list[str] = []

    async def send(reply: OutboundMessage) -> None:
        sent.append(reply.text)

    worker = DeliveryWorker(bus=front, channel="cli", send=send, poll_interval=0.05)
    worker.start()
    try:
        await eventually(lambda: sent == ["something needs you"], timeout=30)
    finally:
        await worker.stop()
    assert await front.due_outbound("cli", limit=10) == []


async def test_a_dead_senders_leases_are_given_back_at_once(stores: tuple[Store, Store]) -> None:
    clock = Clock()
    dead = SqlBus(store=stores[0], clock=clock, owner="host/1/gone")
    alive = SqlBus(store=stores[1], clock=clock, owner="host/2/here")
    (mid,) = await _replies(dead, 1)
    (taken,) = await dead.due_outbound("cli", limit=10, lease_seconds=60)
    assert await alive.due_outbound("cli", limit=10, lease_seconds=60) == []
    assert await alive.release_dead_senders(is_dead=lambda owner: owner == "host/2/here") == 0
    assert await alive.release_dead_senders(is_dead=lambda owner: owner == "host/1/gone") == 1
    (again,) = await alive.due_outbound("cli", limit=10, lease_seconds=60)
    assert again.message.id == taken.message.id and again.message.inbound_id == mid


async def test_a_stopping_worker_gives_back_what_it_did_not_send(
    stores: tuple[Store, Store],
) -> None:
    bus = SqlBus(store=stores[0])
    started = asyncio.Event()

    async def stuck(_message: OutboundMessage) -> None:
        started.set()
        await asyncio.Event().wait()  # the platform never answers

    ids = await _replies(bus, 3)
    worker = DeliveryWorker(bus=bus, channel="cli", send=stuck, poll_interval=0.05)
    worker.start()
    async with asyncio.timeout(30):
        await started.wait()
    other = SqlBus(store=stores[1])
    assert await other.due_outbound("cli", limit=10, lease_seconds=60) == []  # leased
    await worker.stop()  # a graceful restart: due again at once, not after the lease
    again = await other.due_outbound("cli", limit=10, lease_seconds=60)
    assert sorted(d.message.inbound_id for d in again) == sorted(ids)


async def test_a_rate_limited_reply_waits_without_using_up_attempts(
    stores: tuple[Store, Store],
) -> None:
    bus = SqlBus(store=stores[0])
    (mid,) = await _replies(bus, 1)
    tries: list[str] = []

    async def busy_then_sent(reply: OutboundMessage) -> None:
        tries.append(reply.inbound_id)
        if len(tries) <= 5:  # more refusals than max_attempts allows failures
            raise RetryLater("ratelimited", retry_after=0.05)

    worker = DeliveryWorker(
        bus=bus, channel="cli", send=busy_then_sent, max_attempts=2, poll_interval=0.05
    )
    worker.start()
    try:
        await eventually(lambda: _row(stores[0], mid), timeout=30)
    finally:
        await worker.stop()
    assert tries == [mid] * 6
    # One attempt counted: the one that succeeded; the five waits used up none.
    assert await _row(stores[0], mid) == ("delivered", 1, "ratelimited")


async def _row(store: Store, inbound_id: str) -> tuple[str, int, str | None] | None:
    """(status, attempts, last_error) of the reply to ``inbound_id`` once delivered."""
    query = select(OutboundRow.status, OutboundRow.attempts, OutboundRow.last_error).where(
        OutboundRow.inbound_id == inbound_id, OutboundRow.status == "delivered"
    )
    async with store.read() as conn:
        row = (await conn.execute(query)).first()
    return None if row is None else (str(row[0]), int(row[1]), row[2])


async def test_racing_claimers_take_each_message_once_and_each_session_in_order(
    stores: tuple[Store, Store],
) -> None:
    """Four claimers (two per process) race on one queue: every message is claimed once,
    a session never has two messages claimed at once, and each session goes in order."""
    one, two = stores
    publisher = SqlBus(store=one)
    sessions, per_session = 12, 5
    for n in range(per_session):
        for s in range(sessions):
            await publisher.publish_inbound(
                InboundMessage(
                    session_key=f"cli:r{s}",
                    text=str(n),
                    delivery=Delivery(channel="cli", chat_id="c"),
                )
            )
    buses = [SqlBus(store=store) for store in (one, two, one, two)]
    busy: set[str] = set()
    order: dict[str, list[str]] = {}
    claimed: Counter[str] = Counter()

    async def worker(bus: SqlBus, owner: str) -> None:
        while sum(claimed.values()) < sessions * per_session:
            claims = await bus.claim(owner=owner, limit=sessions, lease_seconds=60)
            for claim in claims:
                message = claim.message
                assert message.session_key not in busy, "two claims of one session at once"
                busy.add(message.session_key)
                claimed[message.id] += 1
                order.setdefault(message.session_key, []).append(message.text)
            await asyncio.sleep(0.01)  # the others claim while these are held
            for claim in claims:
                reply = OutboundMessage.answering(claim.message, "ok")
                busy.discard(claim.message.session_key)
                assert await bus.settle(claim.message.id, owner=owner, reply=reply)
            if not claims:
                await asyncio.sleep(0.005)

    await asyncio.wait_for(
        asyncio.gather(*(worker(bus, f"w{i}") for i, bus in enumerate(buses))), 60
    )
    assert set(claimed.values()) == {1}
    assert len(claimed) == sessions * per_session
    assert all(texts == [str(n) for n in range(per_session)] for texts in order.values())
