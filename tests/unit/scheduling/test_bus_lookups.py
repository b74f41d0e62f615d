"""SqlBus for scheduling: message states and the latest user delivery of a session."""

from __future__ import annotations

from core.bus.sql import SqlBus
from core.messages import Delivery, InboundMessage, Origin
from core.store.engine import Store


def message(session: str, *, origin: Origin = "user", chat: str = "c1") -> InboundMessage:
    return InboundMessage(
        session_key=session,
        text="hello",
        delivery=Delivery(channel="test", chat_id=chat, thread_id="t"),
        origin=origin,
    )


async def test_message_states(store: Store) -> None:
    bus = SqlBus(store=store)
    first, second = message("s:a"), message("s:b")
    for m in (first, second):
        await bus.publish_inbound(m)
    sql = SqlBus(store=store)
    (claim, *_) = await sql.claim(owner="t", limit=1, lease_seconds=30)
    states = await bus.message_states([first.id, second.id, "unknown", first.id])
    assert states == {claim.message.id: "claimed"} | {
        m.id: "pending" for m in (first, second) if m.id != claim.message.id
    }
    await sql.settle(claim.message.id, owner="t", reply=None)
    assert (await bus.message_states([claim.message.id])) == {claim.message.id: "done"}
    assert await bus.message_states([]) == {}
    many = [f"id-{i}" for i in range(1200)] + [first.id]
    assert set(await bus.message_states(many)) == {first.id}


async def test_last_user_delivery(store: Store) -> None:
    bus = SqlBus(store=store)
    assert await bus.last_user_delivery("s:a") is None
    await bus.publish_inbound(message("s:a", chat="old"))
    await bus.publish_inbound(message("s:a", chat="new"))
    await bus.publish_inbound(message("s:a", origin="schedule", chat="scheduled"))
    await bus.publish_inbound(message("s:b", chat="other"))
    found = await bus.last_user_delivery("s:a")
    assert found is not None and found.chat_id == "new"
    for _ in range(20):  # only the newest 20 messages are looked at
        await bus.publish_inbound(message("s:a", origin="schedule"))
    assert await bus.last_user_delivery("s:a") is None
