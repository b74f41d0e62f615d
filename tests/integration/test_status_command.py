"""``/status`` speaks of this conversation: running or idle (not counting itself), its
queued messages, and what the context number means; it answers while a turn runs."""

from __future__ import annotations

import asyncio
from pathlib import Path

from core.providers.base import ChatRequest
from core.providers.scripted import FunctionProvider
from tests.integration.harness import inbound, running_core


async def test_status_idle_then_running_with_a_queue(store_url: str, tmp_path: Path) -> None:
    started = asyncio.Event()
    release = asyncio.Event()

    async def reply(request: ChatRequest) -> str:
        if request.messages[-1].content == "slow":
            started.set()
            await release.wait()
        return "ok"

    async with running_core(
        store_url=store_url, workspace=tmp_path / "ws", provider=FunctionProvider(reply)
    ) as (app, replies):
        first = inbound("cli:s", "hello")
        await app.bus.publish_inbound(first)
        await replies.wait([first.id])
        idle = inbound("cli:s", "/status")
        await app.bus.publish_inbound(idle)
        (idle_reply,) = await replies.wait([idle.id])

        slow = inbound("cli:s", "slow")
        await app.bus.publish_inbound(slow)
        async with asyncio.timeout(10):
            await started.wait()
        queued = [inbound("cli:s", f"later {n}") for n in range(2)]
        for message in queued:
            await app.bus.publish_inbound(message)
        busy = inbound("cli:s", "/status")
        await app.bus.publish_inbound(busy)
        try:
            (busy_reply,) = await replies.wait([busy.id], timeout=20)  # before the turn ends
        finally:
            release.set()
        await replies.wait([slow.id, *(m.id for m in queued)])

        new = inbound("cli:s", "/new")
        await app.bus.publish_inbound(new)
        await replies.wait([new.id])
        after_new = inbound("cli:s", "/status")
        await app.bus.publish_inbound(after_new)
        (after_new_reply,) = await replies.wait([after_new.id])

    assert "now: idle · none queued" in idle_reply.text, idle_reply.text
    assert "context #0: the model sees what was said since the last /new" in idle_reply.text
    assert "(/new starts #1)" in idle_reply.text
    assert "process" not in idle_reply.text and "turns running" not in idle_reply.text
    assert "now: a reply is being worked on (/stop stops it) · 2 messages queued" in (
        busy_reply.text
    ), busy_reply.text
    assert "context #1" in after_new_reply.text and "now: idle" in after_new_reply.text
