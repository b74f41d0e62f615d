"""The heartbeat: check-ins driven by HEARTBEAT.md, replies dropped or delivered."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

from sqlmodel import col, select

from channels.base import ChannelContext
from channels.cli import CliChannel
from core.app import CoreApp
from core.bus.tables import OutboundRow
from core.messages import OutboundMessage
from core.providers.scripted import ScriptedProvider
from core.scheduling import HEARTBEAT_FILE, HeartbeatConfig, HeartbeatService, SchedulerConfig
from tests.clock import T0
from tests.clock import ManualClock as Clock
from tests.integration.harness import running_core
from tests.waiting import eventually

SESSION = "test:room"


@asynccontextmanager
async def heartbeat_core(
    tmp_path: Path,
    provider: ScriptedProvider,
    clock: Clock,
    *,
    instructions: str | None,
    deliver_to: str = SESSION,
    deliver: Callable[[OutboundMessage], Awaitable[None]] | None = None,
) -> AsyncIterator[tuple[HeartbeatService, list[OutboundMessage], CoreApp]]:
    url = f"sqlite+aiosqlite:///{tmp_path / 'familiar.db'}"
    async with running_core(
        store_url=url,
        workspace=tmp_path / "ws",
        provider=provider,
        scheduler=SchedulerConfig(timezone="UTC"),
        schedule_clock=clock,
    ) as (app, _):
        if instructions is not None:
            (tmp_path / "ws" / HEARTBEAT_FILE).write_text(f"# Tasks\n{instructions}\n")
        service = app.schedules
        sent: list[OutboundMessage] = []

        async def record(message: OutboundMessage) -> None:
            sent.append(message)
            if deliver is not None:
                await deliver(message)

        heartbeat = HeartbeatService(
            config=HeartbeatConfig(every="30m", active_hours="08:00-22:00", deliver_to=deliver_to),
            scheduler=service,
            bus=app.bus,
            store=app.store,
            workspace=tmp_path / "ws",
            deliver=record,
            poll_interval=0.05,
        )
        await heartbeat.start()
        try:
            yield heartbeat, sent, app
        finally:
            await heartbeat.stop()


async def wait_delivered(app: CoreApp, inbound_id: str) -> None:
    async def delivered() -> bool:
        query = select(OutboundRow.status).where(col(OutboundRow.inbound_id) == inbound_id)
        async with app.store.read() as conn:
            return (await conn.execute(query)).scalar() == "delivered"

    await eventually(delivered, timeout=30, what=f"the reply to {inbound_id} delivered")


async def test_heartbeat_without_instructions_makes_no_model_call(tmp_path: Path) -> None:
    provider = ScriptedProvider()
    async with heartbeat_core(tmp_path, provider, Clock(), instructions=None) as (
        heartbeat,
        sent,
        _,
    ):
        assert await heartbeat.beat() is None  # the scaffolded template is only comments
    assert provider.calls == 0 and sent == []


async def test_heartbeat_outside_active_hours_makes_no_model_call(tmp_path: Path) -> None:
    provider = ScriptedProvider()
    late = Clock(T0.replace(hour=23))
    async with heartbeat_core(tmp_path, provider, late, instructions="- check mail") as (
        heartbeat,
        sent,
        _,
    ):
        assert await heartbeat.beat() is None
    assert provider.calls == 0 and sent == []


async def test_heartbeat_ok_is_not_delivered(tmp_path: Path) -> None:
    provider = ScriptedProvider(replies=["  HEARTBEAT_OK\n"])
    async with heartbeat_core(tmp_path, provider, Clock(), instructions="- check mail") as (
        heartbeat,
        sent,
        app,
    ):
        message_id = await heartbeat.beat()
        assert message_id is not None
        await wait_delivered(app, message_id)
    assert provider.calls == 1 and sent == []
    assert "HEARTBEAT.md" in provider.requests[0].messages[-1].content


async def test_heartbeat_reply_with_news_is_delivered(tmp_path: Path) -> None:
    provider = ScriptedProvider(replies=["The dentist is at 3pm."])
    clock = Clock()
    async with heartbeat_core(tmp_path, provider, clock, instructions="- check the calendar") as (
        heartbeat,
        sent,
        app,
    ):
        message_id = await heartbeat.beat()
        assert message_id is not None
        await wait_delivered(app, message_id)
        assert await heartbeat.beat() is None  # the same check-in again: deduplicated
        clock.advance(30 * 60)
        assert await heartbeat.beat() is not None  # the previous one is done: a new one goes
    (message,) = sent[:1]
    assert message.text == "The dentist is at 3pm."
    assert message.session_key == SESSION  # addressed to where it is delivered
    assert message.delivery.channel == "test" and message.delivery.chat_id == "room"


async def test_a_check_in_for_an_unwatched_cli_session_is_kept_there_unread(
    tmp_path: Path,
) -> None:
    """Nobody has ``familiar chat`` open: the check-in waits, unread, in ``cli:me``."""
    provider = ScriptedProvider(replies=["Your build is red."])
    cli = CliChannel()
    async with heartbeat_core(
        tmp_path,
        provider,
        Clock(),
        instructions="- watch the build",
        deliver_to="cli:me",
        deliver=cli.send,
    ) as (heartbeat, _sent, app):
        await cli.start(ChannelContext(bus=app.bus, hub=app.hub, unread=app.sessions))
        message_id = await heartbeat.beat()
        assert message_id is not None
        await wait_delivered(app, message_id)
        unread = await app.sessions.unread("cli:me")
        history = await app.sessions.all_history("cli:me")
        await cli.stop()
    assert [(u.message_id, u.text) for u in unread] == [(message_id, "Your build is red.")]
    assert [(m.role, m.content, m.unread) for m in history] == [
        ("assistant", "Your build is red.", True)
    ]
