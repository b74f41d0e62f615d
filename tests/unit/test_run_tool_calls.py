"""`run_tool_calls`: parallel-safe calls together, others alone; a stop cancels siblings."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from core.agent.runner import run_tool_calls
from core.errors import TurnCancelled
from core.event_data import EventPayload, ToolComplete, ToolStart
from core.providers.base import ToolCall
from core.tools.base import ToolContext
from core.tools.decorator import tool
from core.tools.registry import ToolRegistry


class _Events:
    def __init__(self) -> None:
        self.seen: list[EventPayload] = []

    async def event(self, data: EventPayload) -> None:
        self.seen.append(data)

    async def delta(self, text: str) -> None:
        pass


async def test_a_stop_in_one_parallel_call_cancels_its_siblings(tmp_path: Path) -> None:
    cancelled: list[str] = []
    waiting = asyncio.Event()

    @tool
    async def wait_long(ctx: ToolContext) -> str:
        """Waits until cancelled."""
        waiting.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append("wait_long")
            raise
        return "never"

    @tool
    async def stopper(ctx: ToolContext) -> str:
        """Stops the turn (once its sibling runs)."""
        await asyncio.wait_for(waiting.wait(), 10)
        raise TurnCancelled("stopped")

    tools = ToolRegistry(tools=[wait_long, stopper], parallel=["*"])
    calls = [ToolCall(id="a", name="wait_long"), ToolCall(id="b", name="stopper")]
    events = _Events()
    with pytest.raises(TurnCancelled):
        await asyncio.wait_for(
            run_tool_calls(
                calls, tools, ToolContext(workspace=tmp_path, session_key="t:x"), events
            ),
            timeout=10,
        )
    assert cancelled == ["wait_long"]
    assert [type(e) for e in events.seen] == [ToolStart, ToolStart]


async def test_unsafe_calls_split_the_parallel_batches(tmp_path: Path) -> None:
    order: list[str] = []
    first_batch: set[int] = set()
    together = asyncio.Event()

    @tool
    async def safe(ctx: ToolContext, n: int) -> str:
        """Parallel-safe."""
        order.append(f"start {n}")
        if n in (1, 2):  # each ends only once both run: run one after the other, they hang
            first_batch.add(n)
            if first_batch == {1, 2}:
                together.set()
            await asyncio.wait_for(together.wait(), 10)
        order.append(f"end {n}")
        return str(n)

    @tool
    async def unsafe(ctx: ToolContext, n: int) -> str:
        """Runs alone."""
        order.append(f"alone {n}")
        return str(n)

    tools = ToolRegistry(tools=[safe, unsafe], parallel=["safe"])
    calls = [
        ToolCall(id="1", name="safe", arguments={"n": 1}),
        ToolCall(id="2", name="safe", arguments={"n": 2}),
        ToolCall(id="3", name="unsafe", arguments={"n": 3}),
        ToolCall(id="4", name="safe", arguments={"n": 4}),
    ]
    events = _Events()
    results = await run_tool_calls(
        calls, tools, ToolContext(workspace=tmp_path, session_key="t:x"), events
    )
    assert [r.content for r in results] == ["1", "2", "3", "4"]
    assert order[:2] == ["start 1", "start 2"]  # together
    assert order[4:] == ["alone 3", "start 4", "end 4"]  # after both ended, then alone
    completes = [e.call_id for e in events.seen if isinstance(e, ToolComplete)]
    assert sorted(completes) == ["1", "2", "3", "4"]
