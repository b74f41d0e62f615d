"""ScheduleService on a real store with an injected clock: firing, restarts, misses, overlap."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import Connection, delete
from sqlmodel import col, select

from core.bus.sql import SqlBus
from core.bus.tables import DedupeRow, InboundRow
from core.errors import CommandError
from core.events import EventLog, EventType
from core.messages import Delivery, InboundMessage
from core.scheduling import (
    SchedulerConfig,
    ScheduleService,
    ScheduleSpec,
    validate_spec,
)
from core.store.engine import Store
from tests.clock import T0
from tests.clock import ManualClock as Clock

SESSION = "test:room"


def origin(session: str = SESSION, text: str = "/every") -> InboundMessage:
    return InboundMessage(
        session_key=session,
        text=text,
        delivery=Delivery(channel="test", chat_id=session, thread_id="t1"),
    )


def spec(kind: str, value: str, prompt: str = "check the build", *, clock: Clock) -> ScheduleSpec:
    return validate_spec(kind, value, prompt, tz=None, now=clock(), default_tz="UTC")


def service(store: Store, clock: Clock, *, grace: float = 300) -> ScheduleService:
    return ScheduleService(
        config=SchedulerConfig(timezone="UTC", misfire_grace=grace),
        store=store,
        bus=SqlBus(store=store),
        events=EventLog(store=store),
        clock=clock,
    )


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
async def svc(store: Store, clock: Clock) -> AsyncIterator[ScheduleService]:
    s = service(store, clock)
    await s.start()
    try:
        yield s
    finally:
        await s.stop()


async def inbound(store: Store) -> list[InboundMessage]:
    async with store.read() as conn:
        query = select(InboundRow.payload).order_by(col(InboundRow.seq))
        rows = (await conn.execute(query)).scalars().all()
    return [InboundMessage.model_validate_json(p) for p in rows]


async def event_types(store: Store, session: str = SESSION) -> list[str]:
    return [e.type for e in await EventLog(store=store).list(session)]


async def settle_all(store: Store) -> None:
    bus = SqlBus(store=store)
    for claim in await bus.claim(owner="t", limit=100, lease_seconds=30):
        await bus.settle(claim.message.id, owner="t", reply=None)


async def test_every_fires_into_its_session_and_rearms(
    store: Store, svc: ScheduleService, clock: Clock
) -> None:
    info = await svc.create(origin(), spec("every", "10s", clock=clock))
    assert info.id >= 1 and info.next_run == T0 + timedelta(seconds=10)
    assert await svc.fire(info.id) is None  # not due yet
    for run in (1, 2, 3):
        clock.advance(10)
        message_id = await svc.fire(info.id)
        assert message_id is not None
        await settle_all(store)
        current = await svc.get(info.id)
        assert current is not None and current.run_count == run
        assert current.next_run == T0 + timedelta(seconds=10 * (run + 1))
    messages = await inbound(store)
    assert [m.text for m in messages] == ["check the build"] * 3
    first = messages[0]
    assert first.origin == "schedule" and first.schedule_id == info.id
    assert first.session_key == SESSION
    assert first.delivery == Delivery(channel="test", chat_id=SESSION, thread_id="t1")
    assert first.event_id == f"schedule:{info.id}:{(T0 + timedelta(seconds=10)).isoformat()}"
    types = await event_types(store)
    assert types == [EventType.SCHEDULE_CREATED] + [EventType.SCHEDULE_FIRED] * 3


async def test_the_armed_job_is_the_service_itself(
    store: Store, svc: ScheduleService, clock: Clock
) -> None:
    info = await svc.create(origin(), spec("after", "10s", clock=clock))
    assert svc.timer is not None
    job = svc.timer.job(info.id)
    assert job is not None and job.func == svc.fire and job.args == (info.id,)
    clock.advance(10)
    await job.func(*job.args)
    assert [m.schedule_id for m in await inbound(store)] == [info.id]


async def test_two_services_run_side_by_side(tmp_path: Path, clock: Clock) -> None:
    stores = [Store(url=f"sqlite+aiosqlite:///{tmp_path / f'{n}.db'}") for n in ("a", "b")]
    for st in stores:
        await st.open()
    services = [service(st, clock) for st in stores]
    for svc in services:
        await svc.start()  # no process-wide registry: a second service is no conflict
    try:
        made = [await svc.create(origin(), spec("after", "10s", clock=clock)) for svc in services]
        clock.advance(10)
        assert all([await svc.fire(i.id) for svc, i in zip(services, made, strict=True)])
        assert [len(await inbound(st)) for st in stores] == [1, 1]
    finally:
        for svc in services:
            await svc.stop()
        for st in stores:
            await st.close()


async def test_after_fires_once_then_is_done(
    store: Store, svc: ScheduleService, clock: Clock
) -> None:
    info = await svc.create(origin(), spec("after", "20s", "stretch", clock=clock))
    clock.advance(20)
    assert await svc.fire(info.id) is not None
    clock.advance(20)
    assert await svc.fire(info.id) is None
    done = await svc.get(info.id)
    assert done is not None and done.status == "done" and done.next_run is None
    assert await svc.list(SESSION) == []
    assert len(await inbound(store)) == 1


async def test_cron_and_at_compute_their_next_runs(svc: ScheduleService, clock: Clock) -> None:
    cron = await svc.create(origin(), spec("cron", "*/15 * * * *", clock=clock))
    assert cron.next_run == T0 + timedelta(minutes=15)
    at = await svc.create(origin(), spec("at", "2035-03-02T08:30", clock=clock))
    assert at.next_run == datetime(2035, 3, 2, 8, 30, tzinfo=UTC)
    clock.advance(15 * 60)
    assert await svc.fire(cron.id) is not None
    again = await svc.get(cron.id)
    assert again is not None and again.next_run == T0 + timedelta(minutes=30)


async def test_cancel_stops_firing_and_respects_the_session(
    store: Store, svc: ScheduleService, clock: Clock
) -> None:
    info = await svc.create(origin(), spec("every", "10s", clock=clock))
    assert await svc.cancel(info.id, "test:other") is None
    cancelled = await svc.cancel(info.id, SESSION)
    assert cancelled is not None and cancelled.status == "cancelled"
    assert await svc.cancel(info.id, SESSION) is None
    clock.advance(10)
    assert await svc.fire(info.id) is None
    assert await inbound(store) == []
    assert await event_types(store) == [EventType.SCHEDULE_CREATED, EventType.SCHEDULE_CANCELLED]


async def test_restart_keeps_ids_and_next_runs(store: Store, clock: Clock) -> None:
    first = service(store, clock)
    await first.start()
    created = [
        await first.create(origin(), spec("every", "1h", clock=clock)),
        await first.create(origin("test:b"), spec("cron", "0 9 * * mon-fri", clock=clock)),
        await first.create(origin(), spec("at", "2035-04-01T10:00", clock=clock)),
    ]
    await first.stop()
    clock.advance(60)
    second = service(store, clock)
    await second.start()
    try:
        listed = await second.list()
        assert [(s.id, s.next_run_at) for s in listed] == [(s.id, s.next_run_at) for s in created]
        assert [s.id for s in await second.list("test:b")] == [created[1].id]
    finally:
        await second.stop()
    assert await inbound(store) == []


async def test_a_run_missed_while_down_fires_once_within_grace(store: Store, clock: Clock) -> None:
    first = service(store, clock, grace=300)
    await first.start()
    info = await first.create(origin(), spec("every", "1m", clock=clock))
    await first.stop()
    clock.advance(60 * 4 + 5)  # four runs missed, the oldest 185 s ago
    second = service(store, clock, grace=300)
    await second.start()
    await second.stop()
    messages = await inbound(store)
    assert len(messages) == 1 and messages[0].schedule_id == info.id
    events = await EventLog(store=store).list(SESSION)
    fired = [e for e in events if e.type == EventType.SCHEDULE_FIRED]
    assert len(fired) == 1
    assert fired[0].data.coalesced_runs == 4 and fired[0].data.late_s == 185
    after = await second.get(info.id)
    assert after is not None and after.next_run == T0 + timedelta(minutes=5)


async def test_a_run_missed_beyond_grace_is_skipped_and_logged(store: Store, clock: Clock) -> None:
    first = service(store, clock, grace=60)
    await first.start()
    every = await first.create(origin(), spec("every", "1m", clock=clock))
    once = await first.create(origin(), spec("after", "30s", "once", clock=clock))
    await first.stop()
    clock.advance(60 * 10 + 30)
    second = service(store, clock, grace=60)
    await second.start()
    await second.stop()
    assert await inbound(store) == []
    events = [
        e for e in await EventLog(store=store).list(SESSION) if e.type == EventType.SCHEDULE_MISSED
    ]
    assert {e.data.schedule_id for e in events} == {every.id, once.id}
    assert all("missed by" in e.data.reason for e in events)
    current = await second.get(every.id)
    assert current is not None and current.status == "active"
    assert current.next_run == T0 + timedelta(minutes=11)
    finished = await second.get(once.id)
    assert finished is not None and finished.status == "done"


async def test_overlapping_firing_is_skipped(
    store: Store, svc: ScheduleService, clock: Clock
) -> None:
    info = await svc.create(origin(), spec("every", "1m", clock=clock))
    clock.advance(60)
    assert await svc.fire(info.id) is not None  # its message is still pending
    clock.advance(60)
    assert await svc.fire(info.id) is None
    assert len(await inbound(store)) == 1
    missed = [
        e for e in await EventLog(store=store).list(SESSION) if e.type == EventType.SCHEDULE_MISSED
    ]
    assert len(missed) == 1 and "still queued or running" in missed[0].data.reason
    current = await svc.get(info.id)
    assert current is not None and current.next_run == T0 + timedelta(minutes=3)
    await settle_all(store)
    clock.advance(60)
    assert await svc.fire(info.id) is not None


async def test_no_refire_after_a_crash_and_the_firing_id_dedupes(
    store: Store, clock: Clock
) -> None:
    first = service(store, clock)
    await first.start()
    info = await first.create(origin(), spec("every", "1m", clock=clock))
    clock.advance(60)
    message_id = await first.fire(info.id)
    # A crash: the service never stops cleanly; a new one starts on the same rows.
    await first.stop()
    second = service(store, clock)
    await second.start()
    await second.stop()
    messages = await inbound(store)
    assert [m.id for m in messages] == [message_id]
    again = await SqlBus(store=store).publish_inbound(
        messages[0].model_copy(update={"id": "other"})
    )
    assert again.duplicate and again.message_id == message_id


async def test_a_firing_recorded_but_not_published_is_published_on_restart(
    store: Store, clock: Clock
) -> None:
    first = service(store, clock)
    await first.start()
    info = await first.create(origin(), spec("every", "1m", clock=clock))
    clock.advance(60)
    message_id = await first.fire(info.id)
    await first.stop()

    # As if the process died between recording the firing and publishing it.
    def lose_the_publish(conn: Connection) -> None:
        conn.execute(delete(InboundRow))
        conn.execute(delete(DedupeRow))

    await store.transact(lose_the_publish)
    clock.advance(5)
    second = service(store, clock)
    await second.start()
    await second.stop()
    assert [m.id for m in await inbound(store)] == [message_id]


async def test_many_schedules_are_created_listed_and_loaded(store: Store, clock: Clock) -> None:
    count = 1000 if store.is_sqlite else 300  # the full 10,000: tests/bench/bench_schedules.py
    first = service(store, clock)
    await first.start()
    every = spec("every", "1h", clock=clock)
    for i in range(count):
        await first.create(origin(f"test:s{i % 50}"), every)
    await first.stop()
    second = service(store, clock)
    await second.start()
    try:
        assert len(await second.list()) == count
        assert len(await second.list("test:s7")) == count // 50
    finally:
        await second.stop()


async def test_a_redelivered_request_does_not_create_a_second_schedule(
    svc: ScheduleService, clock: Clock
) -> None:
    asking = origin()
    first = await svc.create(asking, spec("every", "10s", clock=clock))
    # The same message runs again after a crash before its reply was stored.
    again = await svc.create(asking, spec("every", "10s", clock=clock))
    other = await svc.create(asking, spec("every", "10s", "something else", clock=clock))
    assert again.id == first.id
    assert other.id != first.id  # one message may still ask for two different schedules
    assert len(await svc.list(SESSION)) == 2


async def test_a_session_may_not_pile_up_schedules_without_end(store: Store, clock: Clock) -> None:
    capped = ScheduleService(
        config=SchedulerConfig(timezone="UTC", max_per_session=2),
        store=store,
        bus=SqlBus(store=store),
        events=EventLog(store=store),
        clock=clock,
    )
    every = spec("every", "1h", clock=clock)
    asking = [origin() for _ in range(3)]
    first = await capped.create(asking[0], every)
    await capped.create(asking[1], every)
    with pytest.raises(CommandError, match=r"max_per_session = 2"):
        await capped.create(asking[2], every)
    # A redelivered ask still gets its schedule back; other sessions are not affected.
    assert (await capped.create(asking[0], every)).id == first.id
    await capped.create(origin("test:other"), every)
    assert await capped.cancel(first.id, SESSION, message_id=None) is not None
    await capped.create(asking[2], every)  # room again after a cancel
    assert len(await capped.list(SESSION)) == 2
