"""Memory benchmarks: (a) one session driven to 10,000 turns, (b) recall over 100,000 entries.

Run: ``.venv/bin/python -m tests.bench.bench_memory [turns|recall|all] [--turns N]
[--entries N] [--no-postgres]``.

(a) drives one session through the core in-process (the real runtime, store, bus and
compaction worker; a scripted model that also writes the summaries) and reports, around
turn 10, 1,000 and 10,000, the gateway CPU per turn (process CPU time between publish
and reply, every thread counted) and the prompt size sent to the model. (b) fills the
memory table with synthetic entries in 101 scopes (Zipf-distributed words) and times
``recall`` (own session + global, limit 5) on SQLite and, when reachable, PostgreSQL.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import tempfile
import time
from pathlib import Path

from core.agent.config import AgentConfig
from core.agent.context import ContextConfig
from core.memory import Caller, MemoryConfig, MemoryService
from core.memory.compaction import SUMMARY_SYSTEM_PROMPT
from core.memory.models import MemoryRow
from core.memory.search import scope_token
from core.providers.base import ChatRequest
from core.providers.scripted import ScriptedProvider
from core.store.engine import Store
from tests.conftest import fresh_pg_database
from tests.integration.harness import inbound, running_core

WINDOW = 100
"""Turns averaged at each measuring point."""


def _reply(request: ChatRequest) -> str:
    if request.system.startswith(SUMMARY_SYSTEM_PROMPT[:40]):
        turn = request.messages[-1].content.rsplit("number ", 1)[-1].split()[0]
        return f"The user has been counting; the latest folded number is {turn}. " + "x" * 300
    return "Noted: " + request.messages[-1].content + ". " + "Here is a longer answer. " * 6


WARMUP_TURNS = 300
"""Turns of another session first, so turn 10 of the measured one is not also the
process's first (imports, first statement compilations, first compactions)."""


async def bench_turns(turns: int) -> None:
    points = sorted({10, min(1000, turns - WINDOW), turns - WINDOW})
    cpu: list[float] = []
    prompt: list[int] = []
    provider = ScriptedProvider(fn=_reply)
    agent = AgentConfig(context=ContextConfig(history_token_budget=1500, summary_max_chars=800))
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite+aiosqlite:///{Path(tmp) / 'familiar.db'}"
        async with running_core(
            store_url=url, workspace=Path(tmp) / "ws", provider=provider, agent=agent
        ) as (app, replies):
            for n in range(WARMUP_TURNS):
                warm = inbound("cli:warmup", f"Please remember the number {n} for me.")
                await app.bus.publish_inbound(warm)
                await replies.wait([warm.id])
            provider.requests.clear()
            replies.by_inbound.clear()
            replies.arrived_at.clear()
            warm_compactions = app.compaction.completed
            started = time.perf_counter()
            for n in range(turns):
                message = inbound("cli:bench", f"Please remember the number {n} for me.")
                before, seen = time.process_time(), 0
                await app.bus.publish_inbound(message)
                await replies.wait([message.id])
                cpu.append(time.process_time() - before)
                turn = [
                    r
                    for r in provider.requests[seen:]
                    if not r.system.startswith(SUMMARY_SYSTEM_PROMPT[:40])
                ]
                prompt.append(
                    sum(len(r.system) + sum(len(m.content) for m in r.messages) for r in turn)
                )
                # The test doubles keep everything; a gateway keeps none of it.
                provider.requests.clear()
                replies.by_inbound.clear()
                replies.arrived_at.clear()
            wall = time.perf_counter() - started
            compactions = app.compaction.completed - warm_compactions
            # The same first turns again, in a new session, right after turn 10,000: the
            # machine's speed drifts over a minute; conversation length is what must not.
            fresh_cpu: list[float] = []
            for n in range(10 + WINDOW):
                message = inbound("cli:fresh", f"Please remember the number {n} for me.")
                before = time.process_time()
                await app.bus.publish_inbound(message)
                await replies.wait([message.id])
                fresh_cpu.append(time.process_time() - before)
                provider.requests.clear()
                replies.by_inbound.clear()
                replies.arrived_at.clear()
    print(
        f"(a) one session, {turns:,} turns in {wall:.1f} s wall; {compactions:,} compactions "
        f"(after {WARMUP_TURNS} warm-up turns of another session)"
    )
    # Whole-process CPU of a turn also catches whatever else ran meanwhile (a compaction
    # job, a WAL checkpoint), which lands on arbitrary turns: the median is the typical
    # turn, the mean includes those.
    print(f"    {'turns':>13} {'CPU/turn median':>16} {'mean':>7} {'prompt chars':>13}")
    rows = []
    for p in points:
        window = cpu[p : p + WINDOW]
        median, mean = statistics.median(window) * 1000, statistics.mean(window) * 1000
        size = statistics.mean(prompt[p : p + WINDOW])
        rows.append((median, mean, size))
        print(f"    {p:>6}-{p + WINDOW - 1:<6} {median:>13.2f} ms {mean:>7.2f} {size:>13.0f}")
    for name, col in (("CPU median", 0), ("CPU mean", 1), ("prompt", 2)):
        values = [r[col] for r in rows]
        spread = (max(values) - min(values)) / min(values) * 100
        print(f"    {name}: spread {spread:.1f}% ({'within' if spread <= 10 else 'OVER'} 10%)")
    fresh = statistics.median(fresh_cpu[10 : 10 + WINDOW]) * 1000
    last = rows[-1][0]
    spread = abs(last - fresh) / min(last, fresh) * 100
    print(
        f"    a new session's turns 10-{9 + WINDOW}, measured right after: median {fresh:.2f} ms"
        f" vs {last:.2f} ms at turn {points[-1]:,}: {spread:.1f}%"
        f" ({'within' if spread <= 10 else 'OVER'} 10%)"
    )


def _vocabulary(rng: random.Random, size: int = 20_000) -> tuple[list[str], list[float]]:
    """Word-like tokens (2-4 syllables, so prefixes spread as in a language), Zipf weights."""
    syllables = [c + v for c in "bcdfghjklmnprstvwz" for v in "aeiou"]
    words: dict[str, None] = {}
    while len(words) < size:
        words["".join(rng.choices(syllables, k=rng.randint(2, 4)))] = None
    vocabulary = list(words)
    return vocabulary, [1 / (rank + 10) for rank in range(len(vocabulary))]


async def _fill(store: Store, count: int, rng: random.Random) -> list[str]:
    vocab, weights = _vocabulary(rng)
    table = MemoryRow.__table__  # type: ignore[attr-defined]
    now = time.time()
    batch = 5000
    for start in range(0, count, batch):
        rows = []
        for i in range(start, min(count, start + batch)):
            words = rng.choices(vocab, weights, k=rng.randint(10, 30))
            scope = "global" if i % 10 == 0 else f"cli:s{i % 100}"
            rows.append(
                {
                    "scope": scope,
                    "scope_token": scope_token(scope),
                    "text": " ".join(words),
                    "tags": json.dumps(rng.choices(vocab[:200], k=2)),
                    "source": None,
                    "path": None,
                    "created_at": now - i * 60,
                    "updated_at": now - i * 60,
                }
            )
        await store.transact(lambda conn, rows=rows: conn.execute(table.insert(), rows))
    return [" ".join(rng.choices(vocab, weights, k=rng.randint(2, 4))) for _ in range(500)]


async def _time_recall(url: str, count: int, label: str) -> None:
    store = Store(url=url)
    await store.open()
    try:
        rng = random.Random(7)
        started = time.perf_counter()
        queries = await _fill(store, count, rng)
        filled = time.perf_counter() - started
        memory = MemoryService(store=store, config=MemoryConfig())
        for q in queries[:20]:  # warm caches
            await memory.recall(Caller("cli:s1"), q)
        times, hits = [], 0
        for i, q in enumerate(queries):
            t0 = time.perf_counter()
            found = await memory.recall(Caller(f"cli:s{i % 100}"), q)
            times.append((time.perf_counter() - t0) * 1000)
            hits += bool(found)
        times.sort()
        p50, p99 = times[len(times) // 2], times[int(len(times) * 0.99) - 1]
        print(
            f"(b) {label}: {count:,} entries (filled in {filled:.1f} s), {len(times)} queries, "
            f"{hits} with hits: p50 {p50:.2f} ms, p99 {p99:.2f} ms, max {times[-1]:.2f} ms"
        )
    finally:
        await store.close()


async def bench_recall(count: int, postgres: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        await _time_recall(f"sqlite+aiosqlite:///{Path(tmp) / 'familiar.db'}", count, "SQLite")
    if postgres:
        async with fresh_pg_database() as url:
            await _time_recall(url, count, "PostgreSQL")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("which", nargs="?", choices=["turns", "recall", "all"], default="all")
    parser.add_argument("--turns", type=int, default=10_000)
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--no-postgres", action="store_true")
    args = parser.parse_args()
    if args.which in ("turns", "all"):
        asyncio.run(bench_turns(args.turns))
    if args.which in ("recall", "all"):
        asyncio.run(bench_recall(args.entries, not args.no_postgres))


if __name__ == "__main__":
    main()
