"""MCP tool-call overhead: the model's call of ``mcp__<server>__<tool>`` through our registry.

Run: ``PYTHONPATH=. .venv/bin/python -m tests.bench.bench_mcp [--calls 500] [--concurrency 1]``.
Starts the fake MCP server (``tests.fakes.mcp_tools_server``) once over stdio and once
over streamable HTTP, connects it through `McpManager` as the gateway does, and times
``ToolRegistry.execute`` of ``mcp__bench__echo`` (a tool that does nothing but return
its argument): what an MCP tool costs a turn on top of the tool's own work. Prints the
number of calls made and answered, p50/p99 latency and calls per second.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from core.mcp import McpConfig, McpServerConfig
from core.mcp.manager import McpManager
from core.providers.base import ToolCall
from core.tools.base import ToolContext
from core.tools.registry import ToolRegistry
from tests.fakes.mcp_procs import http_server, stdio_server


@dataclass(frozen=True)
class Result:
    transport: str
    calls: int
    answered: int
    seconds: float
    p50_ms: float
    p99_ms: float

    @property
    def rate(self) -> float:
        return self.answered / self.seconds if self.seconds else 0.0


def _pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


async def _measure(
    transport: str, server: McpServerConfig, calls: int, concurrency: int, workspace: Path
) -> Result:
    registry = ToolRegistry()
    manager = McpManager(
        config=McpConfig(servers={"bench": server}), registry=registry, cwd=workspace
    )
    manager.start(every=True)
    try:
        await manager.wait_settled(60)
        if "mcp__bench__echo" not in registry:
            raise SystemExit(f"{transport}: the server did not start: {manager.status()}")
        ctx = ToolContext(workspace=workspace, session_key="bench:mcp")
        latencies: list[float] = []
        answered = 0

        async def one(i: int) -> None:
            nonlocal answered
            call = ToolCall(id=f"c{i}", name="mcp__bench__echo", arguments={"text": f"m{i}"})
            began = time.perf_counter()
            result = await registry.execute(call, ctx)
            latencies.append((time.perf_counter() - began) * 1000)
            answered += result.content == f"m{i}" and not result.is_error

        for i in range(min(10, calls)):  # warm up: imports, first requests
            await one(-i - 1)
        latencies.clear()
        answered = 0
        queue = iter(range(calls))

        async def worker() -> None:
            for i in queue:
                await one(i)

        began = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        seconds = time.perf_counter() - began
    finally:
        await manager.stop()
    return Result(transport, calls, answered, seconds, _pct(latencies, 50), _pct(latencies, 99))


async def _run(calls: int, concurrency: int) -> list[Result]:
    with tempfile.TemporaryDirectory() as tmp:
        workspace = Path(tmp)
        results = [await _measure("stdio", stdio_server(), calls, concurrency, workspace)]
        async with http_server() as url:
            http = McpServerConfig(url=url)
            results.append(await _measure("http", http, calls, concurrency, workspace))
    return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=500, help="measured calls per transport")
    parser.add_argument("--concurrency", type=int, default=1, help="calls in flight at once")
    args = parser.parse_args(argv)
    results = asyncio.run(_run(args.calls, args.concurrency))
    print(f"MCP tool-call overhead, concurrency {args.concurrency} (echo tool, fake server)")
    print(
        f"{'transport':>9} {'calls':>6} {'answered':>8} {'p50 ms':>7} {'p99 ms':>7} {'calls/s':>8}"
    )
    for r in results:
        print(
            f"{r.transport:>9} {r.calls:>6} {r.answered:>8} {r.p50_ms:>7.2f} "
            f"{r.p99_ms:>7.2f} {r.rate:>8.0f}"
        )


if __name__ == "__main__":
    main()
