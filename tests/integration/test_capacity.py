"""Turns waiting on another session's work give their slot back (subagent-ready capacity)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from core.agent.config import AgentConfig
from core.app import CoreApp
from core.providers.base import ChatRequest, Completion, ToolCall
from core.providers.scripted import FunctionProvider
from core.tools.base import ToolContext
from core.tools.decorator import tool
from tests.integration.harness import inbound, running_core
from tests.waiting import eventually

SLOTS = 2


def _parent_or_child(request: ChatRequest) -> Completion | str:
    last = request.messages[-1]
    if last.role == "tool":
        return f"parent got: {last.content}"
    if last.content.startswith("parent"):
        return Completion(tool_calls=(ToolCall(id="w1", name="wait_for_child", arguments={}),))
    return f"child done: {last.content}"


async def test_parents_waiting_on_children_hold_every_slot_without_deadlock(
    store_url: str, tmp_path: Path
) -> None:
    app_box: list[CoreApp] = []
    peak_in_use = 0
    all_parents_waiting = asyncio.Event()
    waiting = 0

    @tool
    async def wait_for_child(ctx: ToolContext) -> str:
        """Publish a child message in another session and wait for its reply."""
        nonlocal waiting, peak_in_use
        app = app_box[0]
        child = inbound(f"subagent:{ctx.session_key}", f"work for {ctx.session_key}")
        async with ctx.capacity.released():
            waiting += 1
            if waiting == SLOTS:
                all_parents_waiting.set()
            # Children are published only once every slot's parent waits: without the
            # handover no child could ever be claimed.
            await all_parents_waiting.wait()
            await app.bus.publish_inbound(child)
            reply = await app.bus.wait_reply(child.id, timeout=30)
            peak_in_use = max(peak_in_use, app.runtime.slots_in_use)
        assert reply is not None
        return reply.text

    async with running_core(
        store_url=store_url,
        workspace=tmp_path / "ws",
        provider=FunctionProvider(_parent_or_child),
        agent=AgentConfig(max_concurrent_sessions=SLOTS),
        extra_tools=[wait_for_child],
    ) as (app, replies):
        app_box.append(app)
        parents = [inbound(f"cli:p{i}", f"parent {i}") for i in range(SLOTS)]
        for parent in parents:
            await app.bus.publish_inbound(parent)
        answered = await replies.wait([p.id for p in parents], timeout=30)
        assert app.runtime.slots_in_use == 0
    assert [r.text for r in answered] == [
        f"parent got: child done: work for cli:p{i}" for i in range(SLOTS)
    ]
    assert peak_in_use <= SLOTS


async def test_a_turn_taking_its_slot_back_goes_before_new_claims(
    store_url: str, tmp_path: Path
) -> None:
    """One slot: the parent gives it back, a child takes it; the parent asks for it back
    while the child still runs and a third session's message is queued: when the child
    ends, the parent resumes first."""
    order: list[str] = []
    app_box: list[CoreApp] = []
    child_running = asyncio.Event()
    child_may_finish = asyncio.Event()

    async def reply(request: ChatRequest) -> Completion | str:
        last = request.messages[-1].content
        if last == "child work":
            child_running.set()
            await child_may_finish.wait()
        answer = _parent_or_child(request)
        if isinstance(answer, str):
            order.append(answer)
        return answer

    @tool
    async def wait_for_child(ctx: ToolContext) -> str:
        """Start a child, queue an unrelated message, take the slot back while it runs."""
        app = app_box[0]
        async with ctx.capacity.released():
            await app.bus.publish_inbound(inbound("subagent:c", "child work"))
            await child_running.wait()
            await app.bus.publish_inbound(inbound("cli:other", "other"))
            child_may_finish.set()
        return "taken back"

    async with running_core(
        store_url=store_url,
        workspace=tmp_path / "ws",
        provider=FunctionProvider(reply),
        agent=AgentConfig(max_concurrent_sessions=1),
        extra_tools=[wait_for_child],
    ) as (app, replies):
        app_box.append(app)
        parent = inbound("cli:p", "parent")
        await app.bus.publish_inbound(parent)
        (out,) = await replies.wait([parent.id], timeout=30)
        await eventually(lambda: len(order) == 3, what="the queued message answered too")
    assert out.text == "parent got: taken back"
    assert order == ["child done: child work", "parent got: taken back", "child done: other"]
