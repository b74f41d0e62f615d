"""Tool calls of one model response: parallel-safe ones run at the same time, others alone,
and results go back in the calls' order with start/complete events per call."""

from __future__ import annotations

import asyncio
from pathlib import Path

from core.providers.base import ChatMessage, ChatRequest, Completion, ToolCall
from core.providers.scripted import FunctionProvider
from core.tools.base import ToolContext
from core.tools.config import ToolsConfig
from core.tools.decorator import tool
from tests.integration.harness import inbound, running_core

SESSION = "test:parallel"


async def test_parallel_safe_calls_overlap_others_run_alone_results_in_order(
    store_url: str, tmp_path: Path
) -> None:
    log: list[str] = []
    running: set[str] = set()
    overlapped: list[tuple[str, frozenset[str]]] = []
    all_probes_in = asyncio.Event()
    probes = 3

    async def enter(name: str) -> None:
        running.add(name)
        overlapped.append((name, frozenset(running - {name})))
        log.append(f"start {name}")

    @tool
    async def probe(ctx: ToolContext, n: int) -> str:
        """Wait until every probe of the batch runs (they can only all run if parallel)."""
        await enter(f"probe{n}")
        if sum(1 for r in running if r.startswith("probe")) == probes:
            all_probes_in.set()
        try:
            await asyncio.wait_for(all_probes_in.wait(), timeout=5)
            outcome = f"probe {n} ran with the others"
        except TimeoutError:
            outcome = f"probe {n} ran alone"
        running.discard(f"probe{n}")
        log.append(f"end probe{n}")
        return outcome

    @tool
    async def writer(ctx: ToolContext, n: int) -> str:
        """Not parallel-safe: must run alone."""
        await enter(f"writer{n}")
        await asyncio.sleep(0.05)
        running.discard(f"writer{n}")
        log.append(f"end writer{n}")
        return f"wrote {n}"

    calls = (
        ToolCall(id="c1", name="probe", arguments={"n": 1}),
        ToolCall(id="c2", name="probe", arguments={"n": 2}),
        ToolCall(id="c3", name="probe", arguments={"n": 3}),
        ToolCall(id="c4", name="writer", arguments={"n": 4}),
        ToolCall(id="c5", name="writer", arguments={"n": 5}),
    )
    seen: list[ChatMessage] = []

    def reply(request: ChatRequest) -> Completion | str:
        if request.messages[-1].role == "tool":
            seen.extend(request.messages[-len(calls) :])
            return "done"
        return Completion(tool_calls=calls)

    tools = ToolsConfig(parallel_tools=["probe"])
    async with running_core(
        store_url=store_url,
        workspace=tmp_path / "ws",
        provider=FunctionProvider(reply),
        tools=tools,
        extra_tools=[probe, writer],
    ) as (app, replies):
        message = inbound(SESSION, "go")
        await app.bus.publish_inbound(message)
        (out,) = await replies.wait([message.id])
        events = await app.events.list(SESSION, message_id=message.id)
    assert out.text == "done"
    assert [m.tool_call_id for m in seen] == ["c1", "c2", "c3", "c4", "c5"]
    assert [m.content for m in seen] == [
        "probe 1 ran with the others",
        "probe 2 ran with the others",
        "probe 3 ran with the others",
        "wrote 4",
        "wrote 5",
    ]
    # The writers ran alone, after every probe ended, one after the other.
    assert dict(overlapped)["writer4"] == frozenset()
    assert dict(overlapped)["writer5"] == frozenset()
    assert log[-4:] == ["start writer4", "end writer4", "start writer5", "end writer5"]
    starts = [getattr(e.data, "call_id", None) for e in events if e.type == "tool.execution_start"]
    ends = [getattr(e.data, "call_id", None) for e in events if e.type == "tool.execution_complete"]
    assert sorted(starts) == sorted(ends) == ["c1", "c2", "c3", "c4", "c5"]
