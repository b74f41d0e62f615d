"""Memory benchmarks: (a) one session driven to 10,000 turns, (b) recall over 100,000 entries.

Run: ``.venv/bin/python -m tests.bench.bench_memory [turns|recall|all] [--small]
[--turns N] [--rounds N] [--entries N] [--no-postgres]``.

(a) runs the core in-process (the real runtime, store, bus and compaction worker; a
scripted model that also writes the summaries). It first builds sessions to turn 10
(several), 1,000 and 10,000, then measures the three depths interleaved: each round
sends one turn to each (order rotated per round), so the host's speed drifting over the
run hits all three alike. Per depth it reports the gateway CPU per turn (process CPU
time between publish and reply, every thread counted; median and mean) and the prompt
size sent to the model, and the spread between depths. (b) fills the memory table with
synthetic entries in 101 scopes (Zipf-distributed words) and times ``recall`` (own
session + global, limit 5) on SQLite and, when reachable, PostgreSQL. ``--small`` is a
quick run (depths 10 / 100 / 1,000, 100 rounds, 10,000 entries).
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
from core.app import CoreApp
from core.memory import Caller, MemoryConfig, MemoryService
from core.memory.compaction import SUMMARY_SYSTEM_PROMPT
from core.memory.models import MemoryRow
from core.memory.search import scope_token
from core.providers.base import ChatRequest
from core.providers.scripted import ScriptedProvider
from core.store.engine import Store
from tests.conftest import fresh_pg_database
from tests.integration.harness import Replies, inbound, running_core


def _reply(request: ChatRequest) -> str:
    if request.system.startswith(SUMMARY_SYSTEM_PROMPT[:40]):
        turn = request.messages[-1].content.rsplit("number ", 1)[-1].split()[0]
        return f"The user has been counting; the latest folded number is {turn}. " + "x" * 300
    return "Noted: " + request.messages[-1].content + ". " + "Here is a longer answer. " * 6


WARMUP_TURNS = 300
"""Turns of another session first, so the first measured turns are not also the
process's first (imports, first statement compilations, first compactions)."""
SHORT_WINDOW = 100
"""Turns measured per session at the shallow depth (10): several sessions of 10 turns
each take over in turn, so that depth stays near 10 for every round."""


def _prompt_chars(requests: list[ChatRequest]) -> int:
    """Characters the turn sent to the model (its own calls, not a summarising call)."""
    turn = [r for r in requests if not r.system.startswith(SUMMARY_SYSTEM_PROMPT[:40])]
    return sum(len(r.system) + sum(len(m.content) for m in r.messages) for r in turn)


class _Driver:
    """Sends one turn at a time through the running core and measures it."""

    def __init__(self, app: CoreApp, replies: Replies, provider: ScriptedProvider) -> None:
        self.app, self.replies, self.provider = app, replies, provider
        self.turns: dict[str, int] = {}

    async def turn(self, key: str) -> tuple[float, int]:
        """One turn of session ``key``: (process CPU seconds, prompt characters)."""
        n = self.turns.get(key, 0)
        message = inbound(key, f"Please remember the number {n} for me.")
        before = time.process_time()
        await self.app.bus.publish_inbound(message)
        await self.replies.wait([message.id])
        cpu = time.process_time() - before
        prompt = _prompt_chars(self.provider.requests)
        # The test doubles keep everything; a gateway keeps none of it.
        self.provider.requests.clear()
        self.replies.by_inbound.clear()
        self.replies.arrived_at.clear()
        self.turns[key] = n + 1
        return cpu, prompt

    async def drive(self, key: str, upto: int) -> None:
        while self.turns.get(key, 0) < upto:
            await self.turn(key)


def _spread(values: list[float]) -> str:
    spread = (max(values) - min(values)) / min(values) * 100
    return f"spread {spread:.1f}% ({'within' if spread <= 10 else 'OVER'} 10%)"


async def bench_turns(depth: int, rounds: int) -> None:
    """Sessions built to depths 10, ``depth // 10`` and ``depth`` first, then measured
    interleaved: each round sends one turn to each depth (order rotated per round), so
    the host's speed drifting over the run hits all three alike."""
    depths = [10, max(11, depth // 10), depth]
    short = [f"cli:d10-{i}" for i in range(-(-rounds // SHORT_WINDOW))]
    provider = ScriptedProvider(fn=_reply)
    agent = AgentConfig(context=ContextConfig(history_token_budget=1500, summary_max_chars=800))
    cpu: dict[int, list[float]] = {d: [] for d in depths}
    prompt: dict[int, list[int]] = {d: [] for d in depths}
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite+aiosqlite:///{Path(tmp) / 'familiar.db'}"
        async with running_core(
            store_url=url, workspace=Path(tmp) / "ws", provider=provider, agent=agent
        ) as (app, replies):
            driver = _Driver(app, replies, provider)
            started = time.perf_counter()
            await driver.drive("cli:warmup", WARMUP_TURNS)
            for key in short:
                await driver.drive(key, depths[0])
            await driver.drive("cli:mid", depths[1])
            await driver.drive("cli:deep", depths[2])
            built, build_compactions = time.perf_counter() - started, app.compaction.completed
            build_turns = sum(driver.turns.values())
            started = time.perf_counter()
            for r in range(rounds):
                keys = [short[r // SHORT_WINDOW], "cli:mid", "cli:deep"]
                for i in range(3):
                    slot = (r + i) % 3
                    spent, size = await driver.turn(keys[slot])
                    cpu[depths[slot]].append(spent)
                    prompt[depths[slot]].append(size)
            measured = time.perf_counter() - started
            compactions = app.compaction.completed - build_compactions
            reached = dict(driver.turns)
    sessions = f"{len(short)} session{'s' if len(short) > 1 else ''}"
    print(
        f"(a) built: {build_turns:,} turns in {built:.1f} s wall ({WARMUP_TURNS} warm-up, "
        f"{sessions} to turn {depths[0]}, one to {depths[1]:,}, one to {depths[2]:,}), "
        f"{build_compactions:,} compactions"
    )
    print(
        f"    measured: {rounds} rounds x 3 depths = {3 * rounds:,} turns interleaved in "
        f"{measured:.1f} s wall, {compactions:,} compactions; sessions reached "
        f"{reached['cli:mid']:,} and {reached['cli:deep']:,} turns"
    )
    # Whole-process CPU of a turn also catches whatever else ran meanwhile (a compaction
    # job, a WAL checkpoint), which lands on arbitrary turns: the median is the typical
    # turn, the mean includes those.
    print(f"    {'turns':>13} {'CPU/turn median':>16} {'mean':>7} {'prompt chars':>13}")
    rows = []
    for slot, d in enumerate(depths):
        median, mean = statistics.median(cpu[d]) * 1000, statistics.mean(cpu[d]) * 1000
        size = statistics.mean(prompt[d])
        rows.append((median, mean, size))
        last = d + (min(rounds, SHORT_WINDOW) if slot == 0 else rounds) - 1
        label = f"{d}-{last}"
        print(f"    {label:>13} {median:>13.2f} ms {mean:>7.2f} {size:>13.0f}")
    for name, col in (("CPU median", 0), ("CPU mean", 1), ("prompt", 2)):
        print(f"    {name}: {_spread([r[col] for r in rows])}")


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
    parser.add_argument("--turns", type=int, default=None, help="deepest session (10,000)")
    parser.add_argument("--rounds", type=int, default=None, help="interleaved rounds (400)")
    parser.add_argument("--entries", type=int, default=None, help="recall corpus (100,000)")
    parser.add_argument("--no-postgres", action="store_true")
    parser.add_argument(
        "--small",
        action="store_true",
        help="a quick run: depths 10 / 100 / 1,000, 100 rounds, 10,000 entries",
    )
    args = parser.parse_args()
    small = args.small
    args.turns = args.turns or (1000 if small else 10_000)
    args.rounds = args.rounds or (100 if small else 400)
    args.entries = args.entries or (10_000 if small else 100_000)
    if args.which in ("turns", "all"):
        asyncio.run(bench_turns(args.turns, args.rounds))
    if args.which in ("recall", "all"):
        asyncio.run(bench_recall(args.entries, not args.no_postgres))


if __name__ == "__main__":
    main()
