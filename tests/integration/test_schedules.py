"""Schedules end to end: slash commands, the tool, firings answered by the agent, control
routes, the CLI, and the heartbeat."""

from __future__ import annotations

import asyncio
import json
import tempfile
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from click.testing import CliRunner

from core.app import CoreApp
from core.bus.sql import SqlBus
from core.events import EventLog, EventType
from core.messages import OutboundMessage, utcnow
from core.providers.base import Completion, ToolCall
from core.providers.scripted import ScriptedProvider
from core.scheduling import (
    SchedulerConfig,
    ScheduleService,
    firing_id_for,
    firing_message_id,
)
from core.store.engine import Store
from gateway.commands.schedule import schedule_app
from gateway.control.schedules import add_schedule_routes
from tests.clock import ManualClock as Clock
from tests.integration.harness import Replies, inbound, running_core

SESSION = "test:room"


def make_service(
    store: Store, app: CoreApp | None, clock: Callable[[], datetime]
) -> ScheduleService:
    if app is not None:
        return app.schedules
    return ScheduleService(
        config=SchedulerConfig(timezone="UTC"),
        store=store,
        bus=SqlBus(store=store),
        events=EventLog(store=store),
        clock=clock,
    )


@asynccontextmanager
async def scheduled_core(
    store_url: str, workspace: Path, provider: ScriptedProvider, clock: Callable[[], datetime]
) -> AsyncIterator[tuple[CoreApp, Replies, ScheduleService]]:
    async with running_core(
        store_url=store_url,
        workspace=workspace,
        provider=provider,
        scheduler=SchedulerConfig(timezone="UTC"),
        schedule_clock=clock,
    ) as (app, replies):
        yield app, replies, app.schedules


async def say(app: CoreApp, replies: Replies, text: str, session: str = SESSION) -> OutboundMessage:
    message = inbound(session, text)
    await app.bus.publish_inbound(message)
    (reply,) = await replies.wait([message.id])
    return reply


async def test_every_fires_repeatedly_and_unschedule_stops_it(
    store_url: str, tmp_path: Path
) -> None:
    clock = Clock()
    async with scheduled_core(store_url, tmp_path / "ws", ScriptedProvider(), clock) as (
        app,
        replies,
        service,
    ):
        created = await say(app, replies, "/every 10s ping the build")
        assert created.kind == "reply"
        assert created.text.startswith(
            'Scheduled #1 every 10s — next run 2035-03-01 09:00:10 UTC — "ping'
        )
        listed = await say(app, replies, "/schedules")
        assert "#1 every 10s" in listed.text
        assert "No schedules" in (await say(app, replies, "/schedules", "test:elsewhere")).text
        for _ in range(2):
            clock.advance(10)
            fired = await service.fire(1)
            assert fired is not None
            (answer,) = await replies.wait([fired])
            assert answer.text == "echo: ping the build" and answer.session_key == SESSION
        bad = await say(app, replies, "/unschedule #1", "test:elsewhere")
        assert bad.kind == "error" and "no active schedule #1" in bad.text
        gone = await say(app, replies, "/unschedule #1")
        assert gone.text.startswith("Cancelled #1")
        clock.advance(10)
        assert await service.fire(1) is None
        events = [e.type for e in await app.events.list(SESSION)]
        assert events.count(EventType.SCHEDULE_FIRED) == 2
        assert EventType.SCHEDULE_CREATED in events and EventType.SCHEDULE_CANCELLED in events


async def test_after_fires_once(store_url: str, tmp_path: Path) -> None:
    clock = Clock()
    async with scheduled_core(store_url, tmp_path / "ws", ScriptedProvider(), clock) as (
        app,
        replies,
        service,
    ):
        created = await say(app, replies, "/after 1m stretch")
        assert created.text.startswith(
            'Scheduled #1 after 1m — next run 2035-03-01 09:01 UTC — "stretch"'
        )
        clock.advance(60)
        fired = await service.fire(1)
        assert fired is not None
        assert [r.text for r in await replies.wait([fired])] == ["echo: stretch"]
        clock.advance(60)
        assert await service.fire(1) is None
        assert await service.list() == []


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("/every", "usage: /every <interval> <prompt>"),
        ("/every 5s x", "at least 10s"),
        ("/after 2d x", "at most 1d"),
        ("/every 5 x", "add a unit"),
        ("/every 5m", "what should I do every 5m?"),
        ("/every 5m /new", "only plain messages can be scheduled"),
        ("/at 2020-01-01T09:00 x", "is in the past"),
        ("/at tomorrow x", "can't read the date and time"),
        ('/cron "0 25 * * *" x', 'the hour (0-23) field "25" is invalid'),
        ('/cron "0 9 * *" x', "a cron expression has 5 fields"),
        ('/cron "0 9 * * *" tz=Mars/Base x', "unknown timezone 'Mars/Base'"),
        ("/unschedule", "usage: /unschedule <id>"),
        ("/unschedule soon", "usage: /unschedule <id>"),
        ("/unschedule #42", "no active schedule #42 in this session"),
    ],
)
async def test_validation_errors_surface_through_slash_commands(
    tmp_path: Path, command: str, expected: str
) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'familiar.db'}"
    provider = ScriptedProvider()
    async with scheduled_core(url, tmp_path / "ws", provider, Clock()) as (app, replies, service):
        reply = await say(app, replies, command)
        assert reply.kind == "error"
        assert expected in reply.text
        assert await service.list() == []
    assert provider.calls == 0


async def test_the_agent_schedules_through_the_tool(store_url: str, tmp_path: Path) -> None:
    def call(**arguments: object) -> Completion:
        return Completion(
            tool_calls=(ToolCall(id="c1", name="manage_schedule", arguments=arguments),)
        )

    provider = ScriptedProvider(
        replies=[
            call(action="create", kind="every", spec="5s", prompt="water the plants"),
            call(action="create", kind="every", spec="30m", prompt="water the plants"),
            call(action="list"),
            "All set.",
        ]
    )
    async with scheduled_core(store_url, tmp_path / "ws", provider, Clock()) as (
        app,
        replies,
        service,
    ):
        reply = await say(app, replies, "remind me to water the plants every half hour")
        assert reply.text == "All set."
        (info,) = await service.list(SESSION)
        assert info.spec.interval_seconds == 1800 and info.delivery.channel == "test"
    tool_results = [m.content for m in provider.requests[-1].messages if m.role == "tool"]
    assert "at least 10s" in tool_results[0]
    assert "Scheduled #1 every 30m" in tool_results[1]
    assert "#1 every 30m" in tool_results[2]


async def test_control_routes(store: Store) -> None:
    service = make_service(store, None, Clock())
    await service.start()
    app = web.Application()
    add_schedule_routes(app, service)
    async with TestClient(TestServer(app)) as client:
        created = await client.post(
            "/v1/schedules",
            json={
                "kind": "cron",
                "spec": "0 9 * * mon-fri",
                "prompt": "standup",
                "timezone": "Europe/Berlin",
            },
        )
        assert created.status == 201
        body = await created.json()
        assert body["session"] == "cli:default" and body["status"] == "active"
        assert body["next_run"] == "2035-03-02T08:00:00+00:00"  # 09:00 CET on a Friday
        assert body["next_run_local"] == "2035-03-02T09:00:00+01:00"
        assert set(body) == {
            "id",
            "session",
            "kind",
            "spec",
            "timezone",
            "prompt",
            "next_run",
            "next_run_local",
            "last_run",
            "run_count",
            "status",
        }
        bad = await client.post(
            "/v1/schedules", json={"kind": "every", "spec": "1s", "prompt": "x"}
        )
        assert bad.status == 400 and "at least 10s" in (await bad.json())["error"]
        missing = await client.post("/v1/schedules", json={"kind": "every", "spec": "1m"})
        assert missing.status == 400 and "prompt" in (await missing.json())["error"]
        listed = await (await client.get("/v1/schedules")).json()
        assert listed["timezone"] == service.default_timezone
        assert [s["id"] for s in listed["schedules"]] == [body["id"]]
        assert (await client.delete(f"/v1/schedules/{body['id']}")).status == 200
        assert (await client.delete(f"/v1/schedules/{body['id']}")).status == 404
        assert (await client.delete("/v1/schedules/abc")).status == 404
    await service.stop()
    stored = await service.get(body["id"])
    assert (
        stored is not None
        and stored.delivery.channel == "cli"
        and stored.delivery.chat_id == "default"
    )


async def test_cli_add_list_cancel_over_the_socket(tmp_path: Path) -> None:
    store = Store(url=f"sqlite+aiosqlite:///{tmp_path / 'familiar.db'}")
    await store.open()
    service = make_service(store, None, Clock())
    await service.start()
    app = web.Application()
    add_schedule_routes(app, service)
    runner = web.AppRunner(app)
    await runner.setup()
    home = Path(tempfile.mkdtemp(prefix="fam-"))  # short: Unix socket paths are limited
    (home / "run").mkdir()
    await web.UnixSite(runner, str(home / "run" / "gateway.sock")).start()
    cli = CliRunner()

    async def run(*args: str) -> tuple[int, str]:
        result = await asyncio.to_thread(cli.invoke, schedule_app, [*args, "--home", str(home)])
        return result.exit_code, result.output

    try:
        code, out = await run("add", "--every", "5m", "--session", "ops", "check disk")
        assert code == 0 and out.startswith("Scheduled #1 every 5m"), out
        code, out = await run("add", "--after", "1s", "nope")
        assert code == 1 and "at least 10s" in out
        code, out = await run("add", "--every", "5m", "--cron", "* * * * *", "both")
        assert code == 2
        code, out = await run("list", "--json")
        (item,) = json.loads(out)["schedules"]
        assert item["session"] == "cli:ops" and item["prompt"] == "check disk"
        code, out = await run("list")
        assert code == 0 and "check disk" in out
        assert (await run("cancel", "#1"))[0] == 0
        assert (await run("cancel", "1"))[0] == 1
    finally:
        await runner.cleanup()
        await service.stop()
        await store.close()
    code, out = await run("list")
    assert code == 2 and "no familiar gateway is running" in out


@pytest.mark.slow
async def test_every_10s_fires_on_the_real_clock(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'familiar.db'}"
    async with scheduled_core(url, tmp_path / "ws", ScriptedProvider(), utcnow) as (
        app,
        replies,
        service,
    ):
        await say(app, replies, "/every 10s tick")
        created = await service.get(1)
        assert created is not None and created.next_run is not None
        dues = [created.next_run, created.next_run + timedelta(seconds=10)]
        ids = [firing_message_id(firing_id_for(1, due)) for due in dues]
        answers = await replies.wait(ids, timeout=60)
        assert [a.text for a in answers] == ["echo: tick", "echo: tick"]
        info = await service.get(1)
        assert info is not None and info.run_count >= 2
