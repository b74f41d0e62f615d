"""Replies no channel can deliver: refused when a schedule asks for them, shown by
``familiar status`` and ``doctor`` while they wait, given up on as ``delivery.failed``
after ``delivery.expire_after``."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from click.testing import CliRunner

from core.bus.sql import SqlBus
from core.bus.stranded import StrandedReplies
from core.event_data import DeliveryFailed, EventType
from core.events import EventLog
from core.messages import Delivery, InboundMessage, OutboundMessage, new_message_id
from core.scheduling import SchedulerConfig, ScheduleService
from core.store.engine import Store
from gateway.cli import app
from gateway.config import load_config
from gateway.control.schedules import add_schedule_routes
from gateway.daemon import serve
from gateway.undelivered import delivery_check
from tests.waiting import eventually

BASE = "http://familiar"
STRANDED = "slack:T9:C9"


@pytest.fixture(autouse=True)
def _restore_logging(restore_root_logging: None) -> None:
    """Tests here run the daemon in-process."""


def _reply(session: str, channel: str, chat: str = "C9") -> OutboundMessage:
    inbound_id = new_message_id()
    return OutboundMessage(
        id=f"{inbound_id}.reply",
        inbound_id=inbound_id,
        session_key=session,
        delivery=Delivery(channel=channel, chat_id=chat),
        text="the reply nobody reads",
    )


# -- refused at creation -------------------------------------------------------------------


async def test_schedules_for_sessions_nothing_can_answer_are_refused(
    store: Store, tmp_path: Path
) -> None:
    channels = load_config(
        tmp_path,
        channels={
            "teams": {"enabled": True, "anonymous": True},
            "webhook": {"enabled": True},
        },
    ).channels
    bus = SqlBus(store=store)
    service = ScheduleService(
        config=SchedulerConfig(), store=store, bus=bus, events=EventLog(store=store)
    )
    ref = json.dumps({"conversation": {"id": "a:known"}, "serviceUrl": "http://127.0.0.1:9"})
    known = Delivery(channel="teams", chat_id="a:known", route={"ref": ref})
    await bus.publish_inbound(
        InboundMessage(session_key="teams:a:known", text="hi", delivery=known)
    )
    routes = web.Application()
    add_schedule_routes(routes, service, delivery_check(channels))
    async with TestClient(TestServer(routes)) as client:

        async def add(session: str) -> tuple[int, dict[str, Any]]:
            body = {"kind": "every", "spec": "5m", "prompt": "check", "session": session}
            response = await client.post("/v1/schedules", json=body)
            return response.status, await response.json()

        refused = {
            STRANDED: "the slack channel is not enabled ([channels.slack] enabled = false)",
            "teams:a:conv9": "Teams lets the bot write only to a conversation that wrote to "
            "it first, and 'a:conv9' never did (no conversation reference is stored)",
            "matrix:room1": "no channel named 'matrix' is installed",
        }
        for session, why in refused.items():
            status, body = await add(session)
            assert status == 400, body
            assert body["error"] == f"replies to {session} could not be delivered: {why}"
        for session in ("teams:a:known", "cli:ops", "webhook:hook:s1"):
            status, body = await add(session)
            assert status == 201, (session, body)
        listed = await (await client.get("/v1/schedules")).json()
    assert sorted(s["session"] for s in listed["schedules"]) == [
        "cli:ops",
        "teams:a:known",
        "webhook:hook:s1",
    ]


def test_slack_needs_a_conversation_it_has_heard_from(tmp_path: Path) -> None:
    table = {"enabled": True, "bot_token": "xoxb-1", "app_token": "xapp-1"}
    check = delivery_check(load_config(tmp_path, channels={"slack": table}).channels)
    heard = Delivery(channel="slack", chat_id="DALICE", route={"team": "T1"})
    assert check("slack:T1:DALICE", heard) is None
    made_from_key = Delivery(channel="slack", chat_id="T9:C9")  # no message came from it
    problem = check(STRANDED, made_from_key)
    assert problem is not None and "'T9:C9' is not a Slack conversation the bot has" in problem


# -- counted, then given up on (the store's side, with a clock) -----------------------------


async def test_stranded_replies_are_counted_then_given_up_once(store: Store) -> None:
    now = [1_000_000.0]
    stranded = StrandedReplies(store=store, clock=lambda: now[0])
    bus = SqlBus(store=store)
    lost = [_reply(STRANDED, "slack") for _ in range(2)]
    kept = _reply("cli:x", "cli", "x")
    for reply in [*lost, kept]:
        await bus.publish_outbound(reply)
    delivering = {"cli", "subagent", "heartbeat"}
    [report] = await stranded.stranded(delivering)
    assert (report.channel, report.count) == ("slack", 2)

    def why(channel: str) -> str:
        return f"{channel} is off"

    assert await stranded.expire(delivering, older_than=3600, reason=why) == 0
    now[0] = report.oldest_at + 3601
    assert await stranded.expire(delivering, older_than=3600, reason=why) == 2
    assert await stranded.expire(delivering, older_than=3600, reason=why) == 0  # once
    assert await stranded.stranded(delivering) == []
    failed = [e.data for e in await EventLog(store=store).list(STRANDED)]
    assert sorted(d.reply_id for d in failed if isinstance(d, DeliveryFailed)) == sorted(
        r.id for r in lost
    )
    assert {(d.channel, d.error) for d in failed if isinstance(d, DeliveryFailed)} == {
        ("slack", "slack is off")
    }
    assert [d.message.id for d in await bus.due_outbound("cli", limit=10)] == [kept.id]


# -- the gateway: status, doctor, expiry -----------------------------------------------------


async def _publish_stranded(home: Path) -> OutboundMessage:
    store = Store(url=f"sqlite+aiosqlite:///{home / 'familiar.db'}")
    await store.open()
    try:
        reply = _reply(STRANDED, "slack")
        await SqlBus(store=store).publish_outbound(reply)
        return reply
    finally:
        await store.close()


@asynccontextmanager
async def _gateway(home: Path, expire_after: float) -> AsyncIterator[aiohttp.ClientSession]:
    overrides = {
        "provider": {"kind": "scripted"},
        "http": {"enabled": False},
        "delivery": {"expire_after": expire_after},
    }
    stop = asyncio.Event()
    task = asyncio.create_task(serve(home, stop=stop, env={}, config_overrides=overrides))
    connector = aiohttp.UnixConnector(path=str(home / "run" / "gateway.sock"))
    async with aiohttp.ClientSession(connector=connector) as http:
        async with asyncio.timeout(30):
            while True:
                assert not task.done(), f"gateway exited early with {task.result()}"
                try:
                    async with http.get(BASE + "/v1/status") as response:
                        if response.status == 200:
                            break
                except aiohttp.ClientConnectionError:
                    await asyncio.sleep(0.05)
        try:
            yield http
        finally:
            stop.set()
            assert await asyncio.wait_for(task, 30) == 0


def _cli(*args: str) -> Any:
    return CliRunner().invoke(app, list(args), catch_exceptions=False)


async def test_status_and_doctor_show_waiting_replies_and_refuse_the_schedule(
    daemon_home: Path,
) -> None:
    reply = await _publish_stranded(daemon_home)
    home = str(daemon_home)
    async with _gateway(daemon_home, expire_after=7200):
        added = await asyncio.to_thread(
            _cli, "schedule", "add", "--every", "5m", "--session", STRANDED, "x", "--home", home
        )
        listed = await asyncio.to_thread(_cli, "schedule", "list", "--json", "--home", home)
        as_json = await asyncio.to_thread(_cli, "status", "--json", "--home", home)
        as_text = await asyncio.to_thread(_cli, "status", "--home", home)
        doctor = await asyncio.to_thread(_cli, "doctor", "--home", home)
    assert added.exit_code == 1
    assert f"replies to {STRANDED} could not be delivered: the slack channel" in added.output
    assert json.loads(listed.output)["schedules"] == []
    [item] = json.loads(as_json.output)["undelivered"]
    assert item["channel"] == "slack" and item["count"] == 1
    assert item["reason"] == "the slack channel is not enabled ([channels.slack] enabled = false)"
    assert item["oldest_at"] == pytest.approx(reply.created_at.timestamp(), abs=60)
    assert item["expires_at"] == item["oldest_at"] + 7200
    text = " ".join(as_text.output.split())
    assert "undelivered 1 reply for slack waiting, oldest" in text, as_text.output
    assert "given up (delivery.failed) in 1h 59m" in text or "in 2h 0m" in text
    assert "✗ replies deliverable: 1 reply for slack waiting" in doctor.output, doctor.output
    assert doctor.exit_code == 1


async def test_a_waiting_reply_expires_into_delivery_failed(daemon_home: Path) -> None:
    reply = await _publish_stranded(daemon_home)
    store = Store(url=f"sqlite+aiosqlite:///{daemon_home / 'familiar.db'}")
    await store.open()
    events = EventLog(store=store)

    async def given_up() -> list[Any]:
        found = await events.list(STRANDED)
        return [e for e in found if e.type == EventType.DELIVERY_FAILED]

    try:
        async with _gateway(daemon_home, expire_after=0.5) as http:
            await eventually(given_up, what="a delivery.failed event")
            async with http.get(BASE + "/v1/status") as response:
                status = await response.json()
        [event] = await given_up()
    finally:
        await store.close()
    assert status["undelivered"] == []
    assert isinstance(event.data, DeliveryFailed)
    assert (event.data.reply_id, event.data.channel) == (reply.id, "slack")
    assert event.data.error == (
        "not delivered within 0.5s: the slack channel is not enabled "
        "([channels.slack] enabled = false)"
    )
