"""The durable bus on a real database: dedupe, per-session order, leases, idempotent replies."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from core.bus.sql import DEDUPE_WINDOW_SECONDS, SqlBus
from core.bus.wake_socket import SocketWakeups
from core.messages import Delivery, InboundMessage, OutboundMessage
from core.store.engine import Store
from tests.waiting import eventually, started


def msg(session: str, text: str, **kw: object) -> InboundMessage:
    return InboundMessage(
        session_key=session, text=text, delivery=Delivery(channel="cli", chat_id=session), **kw
    )  # type: ignore[arg-type]


class FakeClock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


async def test_publish_dedupes_platform_event_ids(store: Store) -> None:
    bus = SqlBus(store=store)
    first = await bus.publish_inbound(msg("cli:a", "hi", event_id="ev1"))
    again = await bus.publish_inbound(msg("cli:a", "hi", event_id="ev1"))
    assert not first.duplicate
    assert again.duplicate and again.message_id == first.message_id
    claims = await bus.claim(owner="w", limit=10, lease_seconds=30)
    assert [c.message.id for c in claims] == [first.message_id]


async def test_an_event_id_older_than_the_dedupe_window_is_published_again(
    store: Store,
) -> None:
    clock = FakeClock()
    bus = SqlBus(store=store, clock=clock)
    first = await bus.publish_inbound(msg("cli:a", "hi", event_id="ev1"))
    clock.now += DEDUPE_WINDOW_SECONDS + 1
    later = await bus.publish_inbound(msg("cli:a", "hi again", event_id="ev1"))
    again = await bus.publish_inbound(msg("cli:a", "and again", event_id="ev1"))
    assert not later.duplicate and later.message_id != first.message_id
    assert again.duplicate and again.message_id == later.message_id


async def test_one_message_per_session_at_a_time_in_order(store: Store) -> None:
    bus = SqlBus(store=store)
    a1, a2 = msg("cli:a", "a1"), msg("cli:a", "a2")
    b1 = msg("cli:b", "b1")
    for m in (a1, a2, b1):
        await bus.publish_inbound(m)
    first = await bus.claim(owner="w", limit=10, lease_seconds=30)
    assert [c.message.text for c in first] == ["a1", "b1"]
    assert await bus.claim(owner="w", limit=10, lease_seconds=30) == []
    assert await bus.settle(a1.id, owner="w", reply=None)
    second = await bus.claim(owner="w", limit=10, lease_seconds=30)
    assert [c.message.text for c in second] == ["a2"]


async def test_expired_lease_is_reclaimed_before_later_messages(store: Store) -> None:
    clock = FakeClock()
    bus = SqlBus(store=store, clock=clock)
    m1, m2 = msg("cli:a", "1"), msg("cli:a", "2")
    await bus.publish_inbound(m1)
    await bus.publish_inbound(m2)
    (c,) = await bus.claim(owner="dead", limit=5, lease_seconds=10)
    assert c.message.id == m1.id and c.attempt == 1
    clock.now += 11
    # Interrupted: retried alone (a suspect), and its session's later messages wait.
    assert await bus.claim(owner="alive", limit=5, lease_seconds=10) == []
    again = await bus.claim_suspect(owner="alive", lease_seconds=10)
    assert again is not None and again.message.id == m1.id and again.attempt == 2
    stale = OutboundMessage.answering(m1, "old")
    # The attempt that lost its lease can neither finish the message nor answer it.
    assert not await bus.settle(m1.id, owner="dead", reply=stale)
    assert await bus.due_outbound("cli", limit=10) == []
    assert await bus.renew([m1.id], owner="dead", lease_seconds=10) == set()
    assert await bus.renew([m1.id], owner="alive", lease_seconds=10) == {m1.id}
    assert await bus.settle(m1.id, owner="alive", reply=stale.model_copy(update={"text": "new"}))
    (due,) = await bus.due_outbound("cli", limit=10)
    assert due.message.text == "new"


async def test_graceful_release_does_not_count_as_an_attempt(store: Store) -> None:
    bus = SqlBus(store=store)
    m1 = msg("cli:a", "1")
    await bus.publish_inbound(m1)
    for _ in range(3):
        (c,) = await bus.claim(owner="w", limit=5, lease_seconds=60)
        assert c.attempt == 1
        await bus.release([m1.id], owner="w")


async def test_release_dead_owners_makes_claims_available_at_once(store: Store) -> None:
    bus = SqlBus(store=store)
    m1 = msg("cli:a", "1")
    await bus.publish_inbound(m1)
    await bus.claim(owner="gone", limit=5, lease_seconds=600)
    assert await bus.claim(owner="new", limit=5, lease_seconds=600) == []
    assert await bus.release_dead_owners(is_dead=lambda o: o == "gone") == 1
    c = await bus.claim_suspect(owner="new", lease_seconds=600)
    assert c is not None and c.message.id == m1.id


async def test_reply_is_stored_once_per_inbound(store: Store) -> None:
    bus = SqlBus(store=store)
    m1 = msg("cli:a", "1")
    await bus.publish_inbound(m1)
    await bus.claim(owner="w", limit=5, lease_seconds=30)
    reply = OutboundMessage.answering(m1, "x")
    await bus.settle(m1.id, owner="w", reply=reply)
    await bus.settle(m1.id, owner="w", reply=reply.model_copy(update={"text": "second"}))
    due = await bus.due_outbound("cli", limit=10)
    assert [(d.message.id, d.message.text) for d in due] == [(reply.id, "x")]
    assert await bus.mark_delivered(reply.id)
    assert not await bus.mark_delivered(reply.id)
    assert await bus.due_outbound("cli", limit=10) == []


async def test_control_message_overtakes_a_busy_session(store: Store) -> None:
    bus = SqlBus(store=store)
    await bus.publish_inbound(msg("cli:a", "long job"))
    await bus.publish_inbound(msg("cli:a", "queued"))
    await bus.claim(owner="w", limit=5, lease_seconds=30)
    stop = msg("cli:a", "/stop")
    await bus.publish_inbound(stop)
    claims = await bus.claim(owner="w", limit=5, lease_seconds=30)
    assert [c.message.text for c in claims] == ["/stop"]


async def test_wait_reply_is_woken_by_a_settle_in_this_process(store: Store) -> None:
    bus = SqlBus(store=store)
    bus.reply_poll_interval = 60.0  # only the in-process wake-up can end the wait in time
    m = msg("cli:w", "ping")
    await bus.publish_inbound(m)
    waiting = await started(bus.wait_reply(m.id, timeout=30))
    (claim,) = await bus.claim(owner="w", limit=1, lease_seconds=30)
    assert await bus.settle(claim.message.id, owner="w", reply=OutboundMessage.answering(m, "pong"))
    got = await asyncio.wait_for(waiting, 5)
    assert got is not None and got.text == "pong"


async def test_wait_reply_sees_a_reply_settled_by_another_process(store: Store) -> None:
    waiter, worker = SqlBus(store=store), SqlBus(store=store)  # no shared signals
    waiter.reply_poll_interval = 0.05
    m = msg("cli:x", "ping")
    await worker.publish_inbound(m)
    waiting = asyncio.ensure_future(waiter.wait_reply(m.id, timeout=30))
    (claim,) = await worker.claim(owner="w", limit=1, lease_seconds=30)
    await worker.settle(claim.message.id, owner="w", reply=OutboundMessage.answering(m, "pong"))
    got = await asyncio.wait_for(waiting, 10)
    assert got is not None and got.text == "pong"
    # Already answered: returned at once, however long the poll interval.
    waiter.reply_poll_interval = 60.0
    again = await asyncio.wait_for(waiter.wait_reply(m.id, timeout=30), 5)
    assert again == got


async def test_wait_reply_times_out_with_none(store: Store) -> None:
    bus = SqlBus(store=store)
    m = msg("cli:t", "ping")
    await bus.publish_inbound(m)
    assert await bus.wait_reply(m.id, timeout=0.05) is None
    assert await bus.wait_reply("no-such-message", timeout=0.05) is None


async def test_a_settle_wakes_other_claimers_only_when_its_session_has_more_queued(
    store: Store, tmp_path: Path
) -> None:
    worker, peer = SocketWakeups(tmp_path / "wake"), SocketWakeups(tmp_path / "wake")
    await peer.start()
    await worker.start()
    notes: list[str] = []

    def record(topic: str) -> Callable[[str, str], None]:
        return lambda _data, _sender: notes.append(topic)

    for topic in ("inbound", "reply", "done"):
        peer.on(topic, record(topic))
    try:
        bus = SqlBus(store=store)
        bus.connect(worker)
        first, second, alone = msg("cli:q", "1"), msg("cli:q", "2"), msg("cli:alone", "x")
        for m in (first, second, alone):
            await bus.publish_inbound(m)
        claims = {
            c.message.id: c.message for c in await bus.claim(owner="w", limit=5, lease_seconds=30)
        }
        assert set(claims) == {first.id, alone.id}
        worker.announce(("done", ""))  # the publishes' notes arrive before it
        await eventually(lambda: "done" in notes, timeout=10)
        notes.clear()
        await bus.settle(alone.id, owner="w", reply=OutboundMessage.answering(alone, "ok"))
        worker.announce(("done", ""))  # datagrams arrive in order: everything before is in
        await eventually(lambda: "done" in notes, timeout=10)
        assert notes == ["reply", "done"]  # nothing left in that session: no claimer woken
        notes.clear()
        await bus.settle(first.id, owner="w", reply=OutboundMessage.answering(first, "ok"))
        await eventually(lambda: "inbound" in notes, timeout=10)
        assert [c.message.id for c in await bus.claim(owner="w", limit=5, lease_seconds=30)] == [
            second.id
        ]
    finally:
        await worker.stop()
        await peer.stop()
