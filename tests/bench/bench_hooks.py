"""Hook overhead per tool call: no hooks, hooks on without files, one no-op ``preToolUse``.

Run: ``PYTHONPATH=. .venv/bin/python -m tests.bench.bench_hooks [--calls N] [--turns N]``
(``--calls 20 --turns 5`` for a quick check).

(a) ``calls``: one tool call at a time through the tool executor a turn uses
(``TurnHooks.tools``): with hooks off (``hooks.enabled = false``: the registry itself),
with hooks on but no hook file, and with one no-op ``preToolUse`` hook (``"bash":
"true"``: a process spawn per call). Reports the mean and p50/p95 per call and the
overhead over the first mode. (b) ``turns``: the real core on SQLite, a scripted model
that asks for one tool call per message; per message end to end, hooks off versus one
no-op hook. Every run counts the tool calls made and checks the hook really ran
(its log file has one line per call).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from core.event_data import EventType
from core.hooks import Hooks, HooksConfig, TurnHooks, default_sources
from core.messages import Delivery, InboundMessage
from core.providers.base import ChatRequest, Completion, ToolCall
from core.providers.scripted import FunctionProvider
from core.tools.base import ToolContext
from core.tools.decorator import tool
from core.tools.registry import ToolRegistry
from core.trust import WorkspaceTrust
from tests.integration.harness import inbound, running_core
from tests.trusting import trust_workspace


@tool
async def noop(text: str = "") -> str:
    """Return the text unchanged.

    Args:
        text: anything.
    """
    return text


def _write_hook(workspace: Path, log: Path) -> None:
    hooks = workspace / ".github" / "hooks"
    hooks.mkdir(parents=True, exist_ok=True)
    entry = {"type": "command", "bash": f"echo x >> {log}", "timeoutSec": 30}
    (hooks / "noop.json").write_text(json.dumps({"version": 1, "hooks": {"preToolUse": [entry]}}))


def _stats(name: str, took: list[float], base: float | None) -> float:
    mean = statistics.fmean(took) * 1e6
    q = statistics.quantiles(took, n=20) if len(took) >= 20 else [min(took)] * 19
    extra = "" if base is None else f"  overhead {mean - base:9.1f} us/call"
    print(
        f"  {name:28s} mean {mean:9.1f} us  p50 {q[9] * 1e6:9.1f} us  "
        f"p95 {q[18] * 1e6:9.1f} us{extra}"
    )
    return mean


async def bench_calls(calls: int) -> None:
    print(f"(a) one tool call at a time, {calls} calls per mode")
    registry = ToolRegistry(tools=[noop])
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp) / "ws"
        ws.mkdir()
        log = Path(tmp) / "hook.log"
        message = InboundMessage(
            session_key="cli:bench", text="x", delivery=Delivery(channel="bench")
        )
        ctx = ToolContext(workspace=ws, session_key="cli:bench", message=message)

        async def record(_event: object) -> None:
            return None

        def executor(hooks: Hooks | None) -> object:
            turn = TurnHooks(hooks=hooks, message=message, ctx=ctx, record=record, publisher=None)  # type: ignore[arg-type]
            return turn.tools(registry)

        on = Hooks(
            config=HooksConfig(),
            workspace=ws,
            sources=default_sources(ws, None),
            trust=WorkspaceTrust(record=None, workspace=ws),
        )
        base: float | None = None
        made = 0
        for name, hooks in (
            ("hooks off", None),
            ("hooks on, no hook file", on),
            ("one no-op preToolUse", on),
        ):
            if name == "one no-op preToolUse":
                _write_hook(ws, log)
                on = Hooks(
                    config=HooksConfig(),
                    workspace=ws,
                    sources=default_sources(ws, None),
                    trust=trust_workspace(Path(tmp), ws),
                )
                hooks = on
            run = executor(hooks)
            took: list[float] = []
            for i in range(calls):
                call = ToolCall(id=f"c{i}", name="noop", arguments={"text": str(i)})
                t0 = time.perf_counter()
                result = await run.execute(call, ctx)  # type: ignore[attr-defined]
                took.append(time.perf_counter() - t0)
                assert result.content == str(i), result
                made += 1
            mean = _stats(name, took, base)
            base = mean if base is None else base
        ran = len(log.read_text().splitlines())
        assert ran == calls, f"the hook ran {ran} times, expected {calls}"
        print(f"  tool calls made: {made}; no-op hook runs: {ran}")


def _one_tool(request: ChatRequest) -> Completion:
    if request.messages[-1].role == "tool":
        return Completion(text="done")
    return Completion(tool_calls=(ToolCall(id="t1", name="noop", arguments={"text": "hi"}),))


async def bench_turns(turns: int) -> None:
    print(f"(b) whole messages through the core (one tool call each), {turns} per mode")
    base: float | None = None
    for name in ("hooks off", "one no-op preToolUse"):
        with tempfile.TemporaryDirectory() as tmp:
            ws = Path(tmp) / "ws"
            ws.mkdir()
            log = Path(tmp) / "hook.log"
            on = name != "hooks off"
            if on:
                _write_hook(ws, log)
                trust_workspace(Path(tmp), ws)
            async with running_core(
                store_url=f"sqlite+aiosqlite:///{Path(tmp) / 'familiar.db'}",
                workspace=ws,
                provider=FunctionProvider(_one_tool),
                extra_tools=[noop],
                hooks=HooksConfig(enabled=on),
                home=Path(tmp),
            ) as (app, replies):
                took: list[float] = []
                for i in range(turns):
                    m = inbound("cli:bench", f"message {i}")
                    t0 = time.perf_counter()
                    await app.bus.publish_inbound(m)
                    (out,) = await replies.wait([m.id])
                    took.append(time.perf_counter() - t0)
                    assert out.text == "done", out.text
                events = await app.events.list("cli:bench")
            made = sum(1 for e in events if e.type == EventType.TOOL_COMPLETE)
            assert made == turns, made
            mean = _stats(name, took, base)
            base = mean if base is None else base
            ran = len(log.read_text().splitlines()) if on else 0
            assert ran == (turns if on else 0), ran
            print(f"    tool calls made: {made}; no-op hook runs: {ran}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--turns", type=int, default=100)
    args = parser.parse_args(argv)
    print(f"python {sys.version.split()[0]}")
    asyncio.run(bench_calls(args.calls))
    asyncio.run(bench_turns(args.turns))


if __name__ == "__main__":
    main()
