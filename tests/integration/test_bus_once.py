"""One-time keys on the bus (a webhook signature): refused as a replay within their
window by any process or gateway on the database, taken again after it, kept bounded."""

from __future__ import annotations

import asyncio

from sqlalchemy import func, select

from core.bus.base import OnceKey
from core.bus.sql import SqlBus
from core.bus.tables import DedupeRow
from core.messages import Delivery, InboundMessage
from core.store.engine import Store

_dedupe = DedupeRow.__table__  # type: ignore[attr-defined]


def msg(text: str, **kw: object) -> InboundMessage:
    return InboundMessage(
        session_key="webhook:ci:s", text=text, delivery=Delivery(channel="webhook"), **kw
    )  # type: ignore[arg-type]


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


async def _stored(store: Store) -> int:
    bus = SqlBus(store=store)
    return (await bus.queue_counts()).pending


async def test_a_taken_key_is_a_replay_until_its_window_ends(store: Store) -> None:
    clock = Clock()
    bus = SqlBus(store=store, clock=clock)
    once = OnceKey("ci:abc", 600)
    first = await bus.publish_inbound(msg("run"), once=once)
    again = await bus.publish_inbound(msg("run"), once=once)
    other = await bus.publish_inbound(msg("run"), once=OnceKey("ci:def", 600))
    clock.now += 601
    later = await bus.publish_inbound(msg("run"), once=once)
    assert not first.duplicate and not first.replayed
    assert again.replayed and again.duplicate and again.message_id == first.message_id
    assert not other.replayed
    assert not later.replayed and later.message_id != first.message_id
    assert await _stored(store) == 3  # the replay stored nothing


async def test_a_replay_is_refused_before_the_idempotency_key_answers(store: Store) -> None:
    bus = SqlBus(store=store)
    once = OnceKey("ci:abc", 600)
    first = await bus.publish_inbound(msg("run", event_id="ci:deploy-1"), once=once)
    replay = await bus.publish_inbound(msg("run", event_id="ci:deploy-1"), once=once)
    resent = await bus.publish_inbound(
        msg("run", event_id="ci:deploy-1"), once=OnceKey("ci:fresh", 600)
    )
    assert replay.replayed
    assert resent.duplicate and not resent.replayed
    assert resent.message_id == first.message_id


async def test_two_gateways_on_one_database_accept_a_signature_once(store_url: str) -> None:
    """Two stores and buses (two processes, or two gateways on PostgreSQL) race with the
    same key: exactly one publish is stored."""
    stores = [Store(url=store_url), Store(url=store_url)]
    for store in stores:
        await store.open()
    try:
        buses = [SqlBus(store=s) for s in stores]
        once = OnceKey("ci:same-signature", 600)
        results = await asyncio.gather(
            *(bus.publish_inbound(msg(f"copy {i}"), once=once) for i, bus in enumerate(buses * 4))
        )
        stored = await _stored(stores[0])
    finally:
        for store in stores:
            await store.close()
    accepted = [r for r in results if not r.replayed]
    assert len(accepted) == 1 and stored == 1
    assert {r.message_id for r in results} == {accepted[0].message_id}


async def test_expired_keys_are_pruned(store: Store) -> None:
    clock = Clock()
    bus = SqlBus(store=store, clock=clock)
    for i in range(5):
        await bus.publish_inbound(msg(f"m{i}"), once=OnceKey(f"ci:{i}", 600))
    await bus.publish_inbound(msg("idem", event_id="ci:keep-me"))
    clock.now += 700
    await bus.publish_inbound(msg("later"), once=OnceKey("ci:later", 600))
    async with store.read() as conn:
        keys = sorted((await conn.execute(select(_dedupe.c.key))).scalars())
        total = (await conn.execute(select(func.count()).select_from(_dedupe))).scalar()
    assert keys == ["once:webhook:ci:later", "webhook:ci:keep-me"]
    assert total == 2
