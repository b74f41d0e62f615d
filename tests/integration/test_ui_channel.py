"""The web panel's channel behind the real control server: ``ui:NAME`` sessions, the
operator as sender and approver, the route only the gateway's own process may call."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import sys
import tempfile
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from gateway.control.client import ControlClient, ControlError, socket_path
from gateway.control.protocol import Accepted, DeltaLine, ReplyLine
from tests.integration.control_stack import ControlStack, control_stack
from tests.waiting import eventually


@pytest.fixture
async def stack() -> AsyncIterator[ControlStack]:
    home = Path(tempfile.mkdtemp(prefix="fam-", dir="/tmp"))  # short: a socket path
    try:
        async with control_stack(home) as running:
            yield running
    finally:
        shutil.rmtree(home, ignore_errors=True)


async def _post(stack: ControlStack, path: str, body: dict[str, Any]) -> tuple[int, str]:
    # force_close: no kept-alive connection for the server's teardown to cut (a socket
    # collected later fails another test as unraisable)
    connector = aiohttp.UnixConnector(path=str(socket_path(stack.home)), force_close=True)
    async with (
        aiohttp.ClientSession(connector=connector) as http,
        http.post(f"http://familiar{path}", json=body) as response,
    ):
        return response.status, await response.text()


async def test_a_ui_message_is_the_operators_on_the_ui_channel(stack: ControlStack) -> None:
    async with ControlClient(stack.home) as client:
        items = [i async for i in client.send("ui:web", "hello", operator="alice_b")]
    assert isinstance(items[0], Accepted) and items[0].session == "ui:web"
    assert any(isinstance(i, DeltaLine) for i in items)
    assert isinstance(items[-1], ReplyLine) and items[-1].text == "echo: hello"
    info = await stack.core.sessions.info("ui:web")
    assert info is not None and info.channel == "ui"
    [event] = [e for e in await stack.core.events.list("ui:web") if e.type == "user.message"]
    assert event.as_json()["data"]["sender"] == "ui:alice_b"
    await eventually(lambda: stack.ui.waiting == 0, what="the sender detached")
    assert await stack.core.sessions.unread("ui:web") == []


async def test_a_ui_reply_after_the_panel_left_is_kept_unread(stack: ControlStack) -> None:
    async with ControlClient(stack.home) as client:
        items = client.send("ui:gone", "!gate", operator="alice")
        async with contextlib.aclosing(items):
            accepted = await anext(items)
    assert isinstance(accepted, Accepted)
    stack.script.gate.set()

    async def kept_unread() -> bool:
        unread = await stack.core.sessions.unread("ui:gone")
        return [u.message_id for u in unread] == [accepted.message_id]

    await eventually(kept_unread, what="the reply kept unread")


@pytest.mark.parametrize(
    ("path", "body", "problem"),
    [
        ("/v1/messages", {"session": "ui:web", "text": "x"}, "cli:NAME"),
        ("/v1/ui/messages", {"session": "cli:web", "text": "x", "operator": "a"}, "ui:NAME"),
        ("/v1/ui/messages", {"session": "ui:a b", "text": "x", "operator": "a"}, "session"),
        ("/v1/ui/messages", {"session": "ui:web", "text": "x", "operator": "a b"}, "operator"),
        ("/v1/ui/messages", {"session": "ui:web", "text": "x"}, "operator is required"),
        ("/v1/ui/messages", {"session": "ui:web", "text": " ", "operator": "a"}, "empty"),
    ],
)
async def test_bad_ui_sends_get_400_and_store_nothing(
    stack: ControlStack, path: str, body: dict[str, Any], problem: str
) -> None:
    status, text = await _post(stack, path, body)
    assert status == 400 and problem in text
    assert await stack.core.sessions.count() == 0


async def test_another_process_may_not_write_ui_sessions(stack: ControlStack) -> None:
    code = textwrap.dedent(
        f"""
        import asyncio, aiohttp
        async def main():
            connector = aiohttp.UnixConnector(path={str(socket_path(stack.home))!r})
            async with aiohttp.ClientSession(connector=connector) as http:
                body = {{"session": "ui:web", "text": "x", "operator": "mallory"}}
                async with http.post("http://f/v1/ui/messages", json=body) as r:
                    print(r.status, await r.text())
        asyncio.run(main())
        """
    )
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", code, stdout=asyncio.subprocess.PIPE
    )
    out, _ = await proc.communicate()
    assert out.decode().startswith("403 ") and "web panel only" in out.decode()
    assert await stack.core.sessions.count() == 0


async def test_the_cli_route_refuses_ui_sessions(stack: ControlStack) -> None:
    async with ControlClient(stack.home) as client:
        with pytest.raises(ControlError, match="400"):
            [i async for i in client.send("ui:web", "x")]


async def test_sessions_are_filtered_by_channel_and_text_with_unread_counts(
    stack: ControlStack,
) -> None:
    async with ControlClient(stack.home) as client:
        [_ async for _ in client.send("ui:web", "about 100% cats", operator="alice")]
        [_ async for _ in client.send("cli:work", "about dogs")]
        items = client.send("ui:later", "!gate", operator="alice")
        async with contextlib.aclosing(items):
            await anext(items)
        stack.script.gate.set()

        async def unread_later() -> bool:
            found = await client.find_sessions(query="later")
            return [(s["key"], s["unread"]) for s in found["sessions"]] == [("ui:later", 1)]

        await eventually(unread_later, what="ui:later listed with its unread reply")
        everything = await client.find_sessions()
        assert [s["key"] for s in everything["sessions"]] == ["ui:later", "cli:work", "ui:web"]
        assert everything["channels"] == ["cli", "ui"]
        ui = await client.find_sessions(channel="ui")
        assert [s["key"] for s in ui["sessions"]] == ["ui:later", "ui:web"]
        assert [s["key"] for s in (await client.find_sessions(query="CATS"))["sessions"]] == [
            "ui:web"
        ]
        # % is a plain character, not a wildcard.
        assert [s["key"] for s in (await client.find_sessions(query="0% c"))["sessions"]] == [
            "ui:web"
        ]
        assert (await client.find_sessions(query="%d"))["sessions"] == []
        shown = await client.session("ui:later")
        assert shown["session"]["unread"] == 1
        assert [m["role"] for m in shown["history"]] == ["user", "assistant"]
        assert shown["history"][1]["unread"] is True
        assert shown["history"][1]["message_id"] == shown["history"][0]["message_id"]
        bare = await client.session("ui:later", events=True, history=False)
        assert bare["history"] == [] and bare["events"]
        for bad in ({"channel": "a b"}, {"limit": 0}, {"query": "x" * 201}):
            with pytest.raises(ControlError, match="400"):
                await client.find_sessions(**bad)  # type: ignore[arg-type]
