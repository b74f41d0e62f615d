"""Throughput, gateway overhead and peak RSS, in two cases.

- ``empty``: bus + agent loop + OpenAI provider in one process (no channel, no daemon),
  empty sessions, a ~20-character echo reply, one LLM call per message.
- ``realistic`` (:mod:`tests.bench.realistic`): a spawned daemon driven over its control
  socket by N streaming ``ControlClient`` senders; 50 turns of history per session, one
  ``read_file`` tool call and a streamed 1,200-character answer per message (two LLM
  calls); replies go through the CLI channel and its ``DeliveryWorker``.

Run: ``.venv/bin/python -m tests.bench.bench_throughput`` (``--cases``, ``--sizes``,
``--realistic-sizes``, ``--latencies`` pick a subset; ``--profile`` writes a cProfile of
the largest 0 ms empty case). Each case runs in a fresh process so peak RSS is per case.
The fake LLM is a separate process, so its CPU is not counted as ours.

Overhead, in both cases, is each message's time from send to reply seen minus the fake's
*configured* latency times the LLM calls it served for that message's session: the
time spent in our provider client (serialising the request, parsing the stream) counts
as overhead. The work done (replies, LLM calls, tool calls) is counted and asserted.
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
from collections import Counter
from pathlib import Path
from typing import Any

import aiohttp

from core.agent.config import AgentConfig
from core.app import build_core
from core.providers.config import ProviderConfig
from core.providers.openai import OpenAIProvider
from core.tools.config import ToolsConfig
from tests.bench.realistic import run_realistic, start_fake_realistic
from tests.integration.harness import Replies, inbound

ROOT = Path(__file__).resolve().parents[2]


def _pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


async def _served(base_url: str, since: int) -> tuple[int, list[dict[str, Any]]]:
    """The fake's request log from entry ``since`` on, and its total length."""
    root = base_url.removesuffix("/v1")
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"{root}/_fake/log", params={"since": str(since)}) as r,
    ):
        r.raise_for_status()
        body = await r.json()
    return int(body["total"]), list(body["log"])


async def run_case(
    n: int, base_url: str, store_url: str, workspace: Path, latency_ms: int
) -> dict[str, Any]:
    provider = OpenAIProvider(config=ProviderConfig(kind="openai", base_url=base_url, model="fake"))
    app = await build_core(
        store_url=store_url,
        workspace=workspace,
        agent=AgentConfig(max_concurrent_sessions=max(n, 1)),
        tools=ToolsConfig(),
        provider=provider,
    )
    replies = Replies(app)
    pump = asyncio.create_task(replies.pump())
    await app.start()
    warm = inbound("bench:warmup", "warm up")  # first compile of each statement
    await app.bus.publish_inbound(warm)
    await replies.wait([warm.id])
    rounds = [await _round(app, replies, base_url, latency_ms / 1000, n, f"r{r}") for r in range(2)]
    pump.cancel()
    await app.stop(grace=1)
    cold, warm_round = rounds
    return {
        "case": "empty",
        "n": n,
        **warm_round,
        "cold_total_s": cold["total_s"],
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "work": {
            "messages_sent": 2 * n,
            "answered": cold["answered"] + warm_round["answered"],
            "llm_calls_served": cold["llm_calls"] + warm_round["llm_calls"],
        },
    }


async def _round(
    app: Any, replies: Replies, base_url: str, latency_s: float, n: int, tag: str
) -> dict[str, float]:
    """One burst of n messages from n sessions; the first burst also opens the connections."""
    msgs = [inbound(f"bench:{tag}:{i}", f"{tag} message {i}") for i in range(n)]
    log_from, _ = await _served(base_url, 0)
    published: dict[str, float] = {}
    t0 = time.perf_counter()
    cpu0 = time.process_time()

    async def publish(m: Any) -> None:
        published[m.id] = time.perf_counter()
        await app.bus.publish_inbound(m)

    await asyncio.gather(*(publish(m) for m in msgs))
    got = await replies.wait([m.id for m in msgs], timeout=600)
    arrived = replies.arrived_at
    total = max(arrived[m.id] for m in msgs) - t0
    cpu = time.process_time() - cpu0
    keys = {m.session_key for m in msgs}
    _, served = await _served(base_url, log_from)
    calls = Counter(e["session"] for e in served if e["session"] in keys)
    overheads = [
        (arrived[m.id] - published[m.id] - latency_s * calls[m.session_key]) * 1000 for m in msgs
    ]
    answered = sum(1 for m, r in zip(msgs, got, strict=True) if r.text == f"echo: {m.text}")
    llm_calls = sum(calls.values())
    assert answered == n and llm_calls == n and set(calls.values()) == {1}, (
        f"expected {n} echo replies from {n} LLM calls: {answered} replies, {llm_calls} calls"
    )
    return {
        "total_s": round(total, 3),
        "throughput_msg_s": round(n / total, 1),
        "cpu_ms_per_msg": round(cpu / n * 1000, 2),
        "overhead_p50_ms": round(_pct(overheads, 50), 2),
        "overhead_p99_ms": round(_pct(overheads, 99), 2),
        "answered": answered,
        "llm_calls": llm_calls,
    }


def _case_main(args: argparse.Namespace) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="familiar-bench-"))
    store_url = args.store_url or f"sqlite+aiosqlite:///{tmp / 'familiar.db'}"
    if args.case == "realistic":
        result = asyncio.run(run_realistic(args.n, args.base_url, args.latency_ms))
        print(json.dumps(result), flush=True)
        return
    coro = run_case(args.n, args.base_url, store_url, tmp / "ws", args.latency_ms)
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


def _run_case(
    case: str, n: int, latency: int, base_url: str, args: argparse.Namespace
) -> dict[str, Any]:
    cmd = [
        sys.executable, "-m", "tests.bench.bench_throughput", "--case", case,
        "--n", str(n), "--base-url", base_url, "--latency-ms", str(latency),
    ]  # fmt: skip
    if args.store_url:
        cmd += ["--store-url", args.store_url]
    profiled = (
        args.profile
        and case == "empty"
        and n == max(int(x) for x in args.sizes.split(","))
        and latency == 0
    )
    if profiled:
        cmd += ["--profile", args.profile]
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=True).stdout
    if profiled:
        print(out)
    row: dict[str, Any] = json.loads(out.strip().splitlines()[-1]) | {"llm_latency_ms": latency}
    print(json.dumps(row), flush=True)
    return row


def _table(rows: list[dict[str, Any]]) -> None:
    print()
    print(
        "| case | LLM latency | N sessions | total (warm) | total (cold) | throughput "
        "| gateway CPU/msg | overhead p50 | overhead p99 | peak RSS |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['case']} | {r['llm_latency_ms']} ms | {r['n']} | {r['total_s']} s "
            f"| {r['cold_total_s']} s | {r['throughput_msg_s']} msg/s | {r['cpu_ms_per_msg']} ms "
            f"| {r['overhead_p50_ms']} ms | {r['overhead_p99_ms']} ms | {r['peak_rss_mb']} MB |"
        )
    print()
    print("Work done (both bursts; every count asserted against what was asked for):")
    print()
    print(
        "| case | LLM latency | N | messages sent | answered | LLM calls (fake) "
        "| tool calls (event log) | turn_start events | streams complete |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        w = r["work"]
        events = w.get("events", {})
        tools = events.get("tool.execution_complete", "—")
        turns = events.get("assistant.turn_start", "—")
        streamed = w.get("streamed_complete", "—")
        print(
            f"| {r['case']} | {r['llm_latency_ms']} ms | {r['n']} | {w['messages_sent']} "
            f"| {w['answered']} | {w['llm_calls_served']} | {tools} | {turns} | {streamed} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--case", default="", help=argparse.SUPPRESS)
    parser.add_argument("--n", type=int, default=0)
    parser.add_argument("--base-url", default="")
    parser.add_argument("--latency-ms", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--store-url", default="", help="empty case only")
    parser.add_argument("--profile", default="")
    parser.add_argument("--cases", default="empty,realistic")
    parser.add_argument("--sizes", default="1,100,1000", help="N for the empty case")
    parser.add_argument("--realistic-sizes", default="1,100,1000", help="N for realistic")
    parser.add_argument("--latencies", default="0,200", help="fake LLM latency per call, ms")
    args = parser.parse_args()
    if args.case:
        _case_main(args)
        return
    cases = args.cases.split(",")
    latencies = [int(x) for x in args.latencies.split(",")]
    rows = []
    started = time.perf_counter()
    for case in cases:
        sizes = args.sizes if case == "empty" else args.realistic_sizes
        for latency in latencies:
            start = _start_fake if case == "empty" else start_fake_realistic
            fake, base_url = start(latency)
            try:
                for n in [int(x) for x in sizes.split(",")]:
                    rows.append(_run_case(case, n, latency, base_url, args))
            finally:
                fake.terminate()
                fake.wait()
    _table(rows)
    print()
    print(f"(whole run: {time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
