"""The CLI channel behind the real control server: client ids, attended and unattended replies."""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import tempfile
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from core.messages import Delivery, InboundMessage
from gateway.control.client import ControlClient, socket_path
from gateway.control.protocol import Accepted, ReplyLine, StreamLine, parse_line
from tests.integration.control_stack import ControlStack, Relay, control_stack
from tests.waiting import eventually


@pytest.fixture
async def stack() -> AsyncIterator[ControlStack]:
    home = Path(tempfile.mkdtemp(prefix="fam-", dir="/tmp"))  # short: a socket path
    try:
        async with control_stack(home) as running:
            yield running
    finally:
        shutil.rmtree(home, ignore_errors=True)


async def _raw_send(stack: ControlStack, body: dict[str, object]) -> list[StreamLine]:
    connector = aiohttp.UnixConnector(path=str(socket_path(stack.home)))
    async with (
        aiohttp.ClientSession(connector=connector) as http,
        http.post("http://familiar/v1/messages", json=body) as response,
    ):
        assert response.status == 200, await response.text()
        lines = [parse_line(raw) for raw in (await response.read()).splitlines()]
    return [line for line in lines if line is not None]


async def _delivered(stack: ControlStack, message_id: str) -> None:
    """Wait until the CLI channel's ``send`` of the reply to ``message_id`` returned.

    The reply row is pending until ``mark_delivered``, which follows ``send``: once it
    is stored and no longer due, everything ``send`` does (keeping it unread) is done.
    """

    async def done() -> bool:
        status = await stack.core.bus.message_status(message_id)
        due = await stack.core.bus.due_outbound("cli", limit=1000)
        return (
            status is not None
            and status.reply is not None
            and all(d.message.inbound_id != message_id for d in due)
        )

    await eventually(done, timeout=10, what=f"the reply to {message_id} delivered")


async def _unread(stack: ControlStack, key: str) -> list[str | None]:
    return [u.message_id for u in await stack.core.sessions.unread(key)]


async def _history(stack: ControlStack, key: str) -> list[str]:
    return [m.role for m in await stack.core.sessions.all_history(key)]


async def test_same_client_id_stores_one_message_and_attaches_to_it(stack: ControlStack) -> None:
    body = {"session": "cli:idem", "text": "once", "client_id": "c-1", "stream": False}
    first, second = await asyncio.gather(_raw_send(stack, body), _raw_send(stack, body))
    assert isinstance(first[0], Accepted) and isinstance(second[0], Accepted)
    assert first[0].message_id == second[0].message_id
    assert first[-1] == second[-1]
    assert isinstance(first[-1], ReplyLine) and first[-1].text == "echo: once"
    again = await _raw_send(stack, body)  # after the reply: the stored reply comes back
    assert again[-1] == first[-1]
    assert await _history(stack, "cli:idem") == ["user", "assistant"]
    counts = await stack.core.bus.queue_counts("cli:idem")
    assert counts.depth == 0


async def test_client_id_of_another_session_is_refused(stack: ControlStack) -> None:
    await _raw_send(stack, {"session": "cli:a", "text": "x", "client_id": "c-2"})
    connector = aiohttp.UnixConnector(path=str(socket_path(stack.home)))
    async with (
        aiohttp.ClientSession(connector=connector) as http,
        http.post(
            "http://familiar/v1/messages",
            json={"session": "cli:b", "text": "x", "client_id": "c-2"},
        ) as response,
    ):
        assert response.status == 409
        assert "cli:a" in (await response.json())["error"]


@pytest.mark.parametrize("client_id", ["", "a b", "x" * 129, "é", 7])
async def test_bad_client_ids_get_400(stack: ControlStack, client_id: object) -> None:
    connector = aiohttp.UnixConnector(path=str(socket_path(stack.home)))
    async with (
        aiohttp.ClientSession(connector=connector) as http,
        http.post(
            "http://familiar/v1/messages",
            json={"session": "cli:a", "text": "x", "client_id": client_id},
        ) as response,
    ):
        assert response.status == 400
        assert "client_id" in (await response.json())["error"]


async def test_client_retries_a_broken_send_with_the_same_client_id(stack: ControlStack) -> None:
    other = Path(tempfile.mkdtemp(prefix="fam-r-", dir="/tmp"))
    relay = Relay(socket_path(stack.home), socket_path(other), cut_first=True)
    await relay.start()
    try:
        async with ControlClient(other) as client:
            items = [item async for item in client.send("cli:retry", "hello", stream=False)]
    finally:
        await relay.close()
        shutil.rmtree(other, ignore_errors=True)
    bodies = [json.loads(body) for body in relay.posts]
    assert len(bodies) == 2
    assert bodies[0]["client_id"] == bodies[1]["client_id"]
    assert [type(i) for i in items] == [Accepted, ReplyLine]
    assert isinstance(items[-1], ReplyLine) and items[-1].text == "echo: hello"
    assert await _history(stack, "cli:retry") == ["user", "assistant"]
    listed = await stack.core.events.list("cli:retry")
    assert [e.type for e in listed].count("user.message") == 1


async def test_a_later_send_with_the_same_client_id_attaches_to_the_first(
    stack: ControlStack,
) -> None:
    """What a sender does when its send broke and it tries again after a restart."""
    async with ControlClient(stack.home) as client:
        first = [i async for i in client.send("cli:again", "hi", stream=False, client_id="m-1")]
        again = [i async for i in client.send("cli:again", "hi", stream=False, client_id="m-1")]
    assert isinstance(first[0], Accepted) and isinstance(again[0], Accepted)
    assert again[0].message_id == first[0].message_id
    assert isinstance(again[-1], ReplyLine) and again[-1].text == "echo: hi"
    assert await _history(stack, "cli:again") == ["user", "assistant"]


async def test_a_reply_the_sender_got_is_attended(
    stack: ControlStack,
) -> None:
    async with ControlClient(stack.home) as client:
        items = [item async for item in client.send("cli:got", "hi", stream=True)]
    assert isinstance(items[0], Accepted) and isinstance(items[-1], ReplyLine)
    await _delivered(stack, items[0].message_id)
    assert await _unread(stack, "cli:got") == []
    # The handler lets go of the sender once its reply line is written.
    await eventually(lambda: stack.cli.waiting == 0, what="the sender detached")


async def test_a_reply_after_the_sender_left_is_unattended(
    stack: ControlStack,
) -> None:
    async with ControlClient(stack.home) as client:
        items = client.send("cli:gone", "!gate", stream=True)
        async with contextlib.aclosing(items):
            accepted = await anext(items)
        assert isinstance(accepted, Accepted)
    stack.script.gate.set()  # the reply comes once the sender has gone

    async def kept_unread() -> bool:
        # Not `_delivered`: a reply being sent is leased, so no longer "due", before
        # the channel has decided where it went.
        return await _unread(stack, "cli:gone") == [accepted.message_id]

    await eventually(kept_unread, what="the reply kept unread")
    history = await stack.core.sessions.all_history("cli:gone")
    assert [(m.role, m.unread) for m in history] == [("user", False), ("assistant", True)]
    assert stack.cli.waiting == 0


async def test_a_reply_nobody_waits_for_goes_to_watchers(
    stack: ControlStack,
) -> None:
    async with ControlClient(stack.home) as client:
        watched = client.watch("cli:w")
        async with contextlib.aclosing(watched):
            reading = asyncio.ensure_future(anext(watched))
            while not stack.cli._watchers:  # the watch request has reached the server
                await asyncio.sleep(0.01)
            message = InboundMessage(
                id=uuid.uuid4().hex,
                session_key="cli:w",
                text="scheduled hello",
                delivery=Delivery(channel="cli", chat_id="w"),
                origin="schedule",
            )
            await stack.core.bus.publish_inbound(message)
            line = await asyncio.wait_for(reading, 10)
    assert line.message_id == message.id and line.text == "echo: scheduled hello"
    await _delivered(stack, message.id)
    assert await _unread(stack, "cli:w") == []
