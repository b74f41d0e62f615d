"""Wake-ups between processes over PostgreSQL LISTEN/NOTIFY (a real server)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from sqlalchemy import event

from core.bus.ephemeral import EphemeralHub
from core.bus.sql import SqlBus
from core.bus.wake_pg import PgWakeups
from core.messages import Delivery, InboundMessage, OutboundMessage, StreamDelta
from core.store.engine import Store
from tests.waiting import eventually

pytestmark = pytest.mark.postgres


@pytest.fixture
async def pair(pg_url: str) -> AsyncIterator[tuple[PgWakeups, PgWakeups]]:
    a, b = PgWakeups(pg_url), PgWakeups(pg_url)
    await a.start()
    await b.start()
    try:
        yield a, b
    finally:
        await a.stop()
        await b.stop()


async def test_notes_reach_the_others_and_targeted_notes_only_their_peer(
    pair: tuple[PgWakeups, PgWakeups], pg_url: str
) -> None:
    a, b = pair
    third = PgWakeups(pg_url)
    await third.start()
    try:
        got: dict[str, list[tuple[str, str]]] = {"a": [], "b": [], "third": []}
        for name, w in (("a", a), ("b", b), ("third", third)):
            w.on("outbound", lambda data, peer, name=name: got[name].append((data, peer)))
        a.announce(("outbound", "slack"))
        await eventually(lambda: got["b"] and got["third"], timeout=10)
        assert got["b"] == got["third"] == [("slack", a.name)] and got["a"] == []
        b.send_to(a.name, ("outbound", "only-a"))
        await eventually(lambda: got["a"], timeout=10)
        # A note b announces now reaches the third after anything sent to it before.
        b.announce(("outbound", "marker"))
        await eventually(lambda: len(got["third"]) >= 2, timeout=10)
        assert got["third"] == [("slack", a.name), ("marker", b.name)]
        assert got["a"][0] == ("only-a", b.name)
    finally:
        await third.stop()


async def test_a_settle_in_one_process_wakes_a_reply_waiter_in_another(
    pair: tuple[PgWakeups, PgWakeups], pg_url: str
) -> None:
    a, b = pair
    stores = [Store(url=pg_url), Store(url=pg_url)]
    for s in stores:
        await s.open()
    try:
        agent, front = SqlBus(store=stores[0]), SqlBus(store=stores[1])
        agent.connect(a)
        front.connect(b)
        front.reply_poll_interval = 60.0  # only the wake-up can end the wait in time
        message = InboundMessage(
            session_key="cli:x", text="hi", delivery=Delivery(channel="cli", chat_id="x")
        )
        await front.publish_inbound(message)
        (claim,) = await agent.claim(owner="w", limit=1, lease_seconds=30)
        # Nothing else uses the front's store from here: its next statement is the
        # waiter's read, which finds no reply; only the wake-up can end its wait.
        read = asyncio.Event()
        event.listen(stores[1].engine.sync_engine, "after_cursor_execute", lambda *_: read.set())
        waiter = asyncio.create_task(front.wait_reply(message.id, timeout=30))
        await asyncio.wait_for(read.wait(), 10)
        assert not waiter.done()
        await agent.settle(
            claim.message.id, owner="w", reply=OutboundMessage.answering(message, "yo")
        )
        async with asyncio.timeout(10):
            reply = await waiter
        assert reply is not None and reply.text == "yo"
    finally:
        for s in stores:
            await s.close()


async def test_ephemerals_stream_to_the_subscribing_process(
    pair: tuple[PgWakeups, PgWakeups],
) -> None:
    a, b = pair
    agent, front = EphemeralHub(), EphemeralHub()
    agent.connect(a)
    front.connect(b)
    delivery = Delivery(channel="cli", chat_id="c")
    async with front.subscribe("m1") as sub:
        await eventually(lambda: agent.has_subscribers("m1"), timeout=10)
        for text in ("str", "eam"):
            agent.emit(
                StreamDelta(inbound_id="m1", session_key="cli:c", delivery=delivery, text=text)
            )
        received = ""
        async with asyncio.timeout(10):
            while received != "stream":
                received += (await sub.get()).text


async def test_assistants_in_other_schemas_are_not_woken(pg_url: str) -> None:
    home, replica = PgWakeups(pg_url, "home"), PgWakeups(pg_url, "home")
    work, work_peer = PgWakeups(pg_url, "work"), PgWakeups(pg_url, "work")
    got: dict[str, list[str]] = {"replica": [], "work": []}
    replica.on("outbound", lambda data, _peer: got["replica"].append(data))
    work.on("outbound", lambda data, _peer: got["work"].append(data))
    for w in (home, replica, work, work_peer):
        await w.start()
    try:
        assert (home.channel, work.channel) == ("familiar_wake_home", "familiar_wake_work")
        home.announce(("outbound", "for home"))
        await eventually(lambda: got["replica"] == ["for home"], timeout=10)
        # Sent after home's note reached the replica: had work heard home's, it came first.
        work_peer.announce(("outbound", "for work"))
        await eventually(lambda: got["work"], timeout=10)
        assert got == {"replica": ["for home"], "work": ["for work"]}
    finally:
        for w in (home, replica, work, work_peer):
            await w.stop()


async def test_lost_connections_come_back(pair: tuple[PgWakeups, PgWakeups], pg_url: str) -> None:
    import asyncpg  # type: ignore[import-untyped]
    from sqlalchemy.engine import make_url

    a, b = pair
    got: list[str] = []
    b.on("outbound", lambda data, _peer: got.append(data))
    dsn = make_url(pg_url).set(drivername="postgresql").render_as_string(False)
    admin = await asyncpg.connect(dsn)
    try:  # the server drops both listening connections (a restart or a network cut would)
        killed = await admin.fetchval(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE pid <> pg_backend_pid() AND datname = current_database()"
        )  # the test's own fresh database: only a's and b's connections
        assert killed == 2
    finally:
        await admin.close()

    def lost() -> bool:
        a.announce(("outbound", "probe"))
        return a.dropped > 0

    await eventually(lost, what="a note dropped while a's connection is down", timeout=20)

    def delivered() -> bool:
        a.announce(("outbound", "after"))  # dropped until both are back, so say it again
        return "after" in got

    await eventually(delivered, what="a note after both reconnected", timeout=20)
