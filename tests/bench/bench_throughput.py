"""Throughput, gateway overhead and peak RSS of bus + agent loop + openai provider.

Run: ``.venv/bin/python -m tests.bench.bench_throughput`` (add ``--profile`` to write a
cProfile of the N=1000, 0 ms case). Each case runs in a fresh subprocess so peak RSS is
per case. The fake LLM is a separate process, so its CPU is not counted as ours.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import pstats
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from core.agent.config import AgentConfig
from core.app import build_core
from core.providers.base import ChatRequest, Completion, StreamEvent
from core.providers.config import ProviderConfig
from core.providers.openai import OpenAIProvider
from core.tools.config import ToolsConfig
from tests.integration.harness import Replies, inbound

ROOT = Path(__file__).resolve().parents[2]


class TimedProvider:
    """Wraps a provider and adds up the time each message spends waiting on the LLM."""

    def __init__(self, inner: OpenAIProvider) -> None:
        self.inner = inner
        self.name = inner.name
        self.llm_seconds: dict[str, float] = {}

    async def stream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        key = request.messages[-1].content
        start = time.perf_counter()
        async for item in self.inner.stream(request):
            yield item
        self.llm_seconds[key] = self.llm_seconds.get(key, 0.0) + time.perf_counter() - start

    async def complete(self, request: ChatRequest) -> Completion:
        return await self.inner.complete(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


def _pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


async def run_case(n: int, base_url: str, store_url: str, workspace: Path) -> dict[str, Any]:
    provider = TimedProvider(
        OpenAIProvider(config=ProviderConfig(kind="openai", base_url=base_url, model="fake"))
    )
    app = await build_core(
        store_url=store_url,
        workspace=workspace,
        agent=AgentConfig(max_concurrent_sessions=max(n, 1)),
        tools=ToolsConfig(),
        provider=provider,  # type: ignore[arg-type]
    )
    replies = Replies(app)
    pump = asyncio.create_task(replies.pump())
    await app.start()
    warm = inbound("bench:warmup", "warm up")  # first compile of each statement
    await app.bus.publish_inbound(warm)
    await replies.wait([warm.id])
    rounds = [await _round(app, replies, provider, n, f"r{r}") for r in range(2)]
    pump.cancel()
    await app.stop(grace=1)
    cold, warm_round = rounds
    return {
        "n": n,
        **warm_round,
        "cold_total_s": cold["total_s"],
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


async def _round(
    app: Any, replies: Replies, provider: TimedProvider, n: int, tag: str
) -> dict[str, float]:
    """One burst of n messages from n sessions; the first burst also opens the connections."""
    msgs = [inbound(f"bench:{tag}:{i}", f"{tag} message {i}") for i in range(n)]
    published: dict[str, float] = {}
    t0 = time.perf_counter()
    cpu0 = time.process_time()

    async def publish(m: Any) -> None:
        published[m.id] = time.perf_counter()
        await app.bus.publish_inbound(m)

    await asyncio.gather(*(publish(m) for m in msgs))
    await replies.wait([m.id for m in msgs], timeout=600)
    arrived = replies.arrived_at
    total = max(arrived[m.id] for m in msgs) - t0
    cpu = time.process_time() - cpu0
    overheads = [
        (arrived[m.id] - published[m.id] - provider.llm_seconds.get(m.text, 0.0)) * 1000
        for m in msgs
    ]
    return {
        "total_s": round(total, 3),
        "throughput_msg_s": round(n / total, 1),
        "cpu_ms_per_msg": round(cpu / n * 1000, 2),
        "overhead_p50_ms": round(_pct(overheads, 50), 2),
        "overhead_p99_ms": round(_pct(overheads, 99), 2),
    }


def _case_main(args: argparse.Namespace) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="familiar-bench-"))
    store_url = args.store_url or f"sqlite+aiosqlite:///{tmp / 'familiar.db'}"
    coro = run_case(args.n, args.base_url, store_url, tmp / "ws")
    if args.profile:
        prof = cProfile.Profile()
        result = prof.runcall(asyncio.run, coro)
        prof.dump_stats(args.profile)
        pstats.Stats(args.profile).sort_stats("cumulative").print_stats(25)
    else:
        result = asyncio.run(coro)
    print(json.dumps(result), flush=True)


def _start_fake(latency_ms: int) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.fakes.fake_openai",
            "--port",
            "0",
            "--latency-ms",
            str(latency_ms),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline().split()
    return proc, f"http://127.0.0.1:{line[1]}/v1"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--case", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--n", type=int, default=0)
    parser.add_argument("--base-url", default="")
    parser.add_argument("--store-url", default="")
    parser.add_argument("--profile", default="")
    parser.add_argument("--sizes", default="1,100,1000")
    parser.add_argument("--latencies", default="0,200")
    args = parser.parse_args()
    if args.case:
        _case_main(args)
        return
    rows = []
    for latency in [int(x) for x in args.latencies.split(",")]:
        fake, base_url = _start_fake(latency)
        try:
            for n in [int(x) for x in args.sizes.split(",")]:
                cmd = [
                    sys.executable,
                    "-m",
                    "tests.bench.bench_throughput",
                    "--case",
                    "--n",
                    str(n),
                    "--base-url",
                    base_url,
                ]
                if args.store_url:
                    cmd += ["--store-url", args.store_url]
                if (
                    args.profile
                    and n == max(int(x) for x in args.sizes.split(","))
                    and latency == 0
                ):
                    cmd += ["--profile", args.profile]
                out = subprocess.run(
                    cmd, cwd=ROOT, capture_output=True, text=True, check=True
                ).stdout
                if args.profile and "--profile" in cmd:
                    print(out)
                row = json.loads(out.strip().splitlines()[-1]) | {"llm_latency_ms": latency}
                rows.append(row)
                print(json.dumps(row), flush=True)
        finally:
            fake.terminate()
            fake.wait()
    print()
    print(
        "| LLM latency | N sessions | total (warm) | total (cold) | throughput | gateway CPU/msg "
        "| overhead p50 | overhead p99 | peak RSS |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['llm_latency_ms']} ms | {r['n']} | {r['total_s']} s | {r['cold_total_s']} s "
            f"| {r['throughput_msg_s']} msg/s | {r['cpu_ms_per_msg']} ms "
            f"| {r['overhead_p50_ms']} ms | {r['overhead_p99_ms']} ms | {r['peak_rss_mb']} MB |"
        )


if __name__ == "__main__":
    main()
