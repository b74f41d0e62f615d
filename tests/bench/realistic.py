"""The realistic throughput case, measured through the public interface.

A real daemon process (``python -m gateway.daemon --home H``) talks to the fake OpenAI
server (another process) in its ``--tool-then-text`` mode, and N senders each drive one
``cli:`` session over the control socket with their own
:class:`gateway.control.client.ControlClient` (``send(..., stream=True)``), like N
``familiar send`` processes would. Each session already has 50 prior turns in its
history (seeded through :class:`core.sessions.SessionStore` before the daemon starts,
compacted like the turn layer does, so the burst runs at steady state), and each
message costs one ``read_file`` tool call and two LLM calls, the second streaming a
1,200-character answer in 20-character chunks. Replies go through the CLI channel and
its ``DeliveryWorker``.

Measured per burst: wall time until the last reply reached its sender, the daemon's
CPU (``/proc/<pid>/stat`` before and after), each message's overhead (send to reply
seen, minus the fake's configured latency times the LLM calls it served for that
session), and the daemon's peak RSS (``VmHWM``). The work done is counted from the
fake's request log and the daemon's event log (the ``familiar sessions show --events``
API) and asserted to be what was asked for.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import aiohttp
from sqlalchemy import Connection

from core.agent.context import ContextBuilder, ContextConfig, compact
from core.providers.base import ChatMessage, ToolCall
from core.sessions import SessionStore
from core.store.engine import Store
from gateway.control.client import ControlClient, DaemonUnavailable
from gateway.control.protocol import line_dict
from tests.daemon_env import daemon_env
from tests.fakes.fake_openai import prose

__all__ = ["HISTORY_TURNS", "REPLY_CHARS", "run_realistic", "start_fake_realistic"]

ROOT = Path(__file__).resolve().parents[2]
HISTORY_TURNS = 50
REPLY_CHARS = 1200
CHUNK_CHARS = 20
TOOL_PATH = "notes/bench.md"
MARKER = "bench-marker-5f1c"
NOTES = f"# Ops notes ({MARKER})\n\n{prose(300)}\n"
_CLK = os.sysconf("SC_CLK_TCK")


def start_fake_realistic(latency_ms: int) -> tuple[subprocess.Popen[str], str]:
    """Start the fake in tool-then-text mode; returns it and its ``/v1`` base URL."""
    proc = subprocess.Popen(
        [
            sys.executable, "-m", "tests.fakes.fake_openai", "--port", "0",
            "--latency-ms", str(latency_ms), "--tool-then-text",
            "--tool", "read_file", "--tool-args", json.dumps({"path": TOOL_PATH}),
            "--reply-chars", str(REPLY_CHARS), "--chunk-chars", str(CHUNK_CHARS),
            "--expect-in-result", MARKER,
        ],
        cwd=ROOT, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    line = proc.stdout.readline().split()
    return proc, f"http://127.0.0.1:{line[1]}/v1"


# -- /proc ------------------------------------------------------------------------------


def _cpu_seconds(pid: int) -> float:
    """User + system CPU of the whole process (all threads), from /proc/<pid>/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _CLK  # utime, stime (fields 14, 15)


def _peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return round(int(line.split()[1]) / 1024, 1)
    raise RuntimeError("no VmHWM")


def _pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


# -- seeding ----------------------------------------------------------------------------


def _prior_turn(t: int) -> list[ChatMessage]:
    """One earlier turn shaped like the measured ones: ask, read_file, tool result, answer."""
    call = ToolCall(id=f"call_seed{t:02d}", name="read_file", arguments={"path": TOOL_PATH})
    return [
        ChatMessage(role="user", content=f"Earlier question {t}: {prose(120)}"),
        ChatMessage(role="assistant", content="", tool_calls=(call,)),
        ChatMessage(role="tool", content=NOTES, tool_call_id=call.id, name="read_file"),
        ChatMessage(role="assistant", content=prose(REPLY_CHARS)),
    ]


async def seed_history(store_url: str, workspace: Path, keys: list[str]) -> None:
    """Give each session HISTORY_TURNS prior turns as history rows, at steady state.

    Uses the store's public API (``SessionStore.*_in`` in ``Store.transact`` jobs): the
    rows, and the summary of what falls out of the context window (computed as
    ``core.agent.turn`` does), so the first measured turn does not pay a one-off
    compaction of the whole seeded history.
    """
    store = Store(url=store_url)
    await store.open()
    sessions = SessionStore(store=store)
    config = ContextConfig()
    builder = ContextBuilder(workspace=workspace, config=config)
    turns = [_prior_turn(t) for t in range(HISTORY_TURNS)]

    def job_for(key: str) -> Any:
        def job(conn: Connection) -> None:
            state = sessions.ensure_in(conn, key, "cli")
            for turn in turns:
                sessions.add_messages_in(
                    conn, key=key, epoch=state.epoch,
                    inbound_id=f"seed-{uuid.uuid4().hex[:20]}", messages=turn,
                )  # fmt: skip
            entries = sessions.history_in(conn, state)
            window = builder.window([e.message for e in entries], summary=state.summary)
            summary = None
            if window.dropped:
                text = compact(window.dropped, state.summary, max_chars=config.summary_max_chars)
                summary = (text, entries[len(window.dropped) - 1].id)
            added = sum(len(turn) for turn in turns)
            sessions.touch_in(conn, key=key, added=added, summary=summary)

        return job

    try:
        for start in range(0, len(keys), 100):
            await asyncio.gather(*(store.transact(job_for(k)) for k in keys[start : start + 100]))
    finally:
        await store.close()


# -- the daemon -------------------------------------------------------------------------


def _write_config(home: Path, base_url: str, n: int) -> None:
    (home / "config.toml").write_text(
        f'[provider]\nkind = "openai"\nbase_url = "{base_url}"\nmodel = "fake-model"\n'
        f'api_key = "sk-bench"\n\n[http]\nenabled = false\n\n'
        f"[agent]\nmax_concurrent_sessions = {max(n, 1)}\n"
    )


def _spawn_daemon(home: Path, launcher: str | None = None) -> subprocess.Popen[bytes]:
    """``python -m gateway.daemon --home HOME``, logging to ``HOME/daemon.log``.

    With ``FAMILIAR_BENCH_DAEMON_PROFILE=FILE`` the daemon runs under cProfile (main
    thread only) and writes its stats to FILE when it stops. ``launcher``: Python code
    run with ``-c`` instead of ``-m gateway.daemon`` (it runs the daemon itself; see
    `tests.bench.bench_gc`).
    """
    profile = os.environ.get("FAMILIAR_BENCH_DAEMON_PROFILE")
    wrap = ["-m", "cProfile", "-o", profile] if profile else []
    start = ["-c", launcher] if launcher is not None else [*wrap, "-m", "gateway.daemon"]
    with (home / "daemon.log").open("ab") as log:
        return subprocess.Popen(
            [sys.executable, *start, "--home", str(home)],
            cwd=ROOT, env=daemon_env(single=True), stdout=log, stderr=log,
        )  # fmt: skip


async def _wait_ready(home: Path, proc: subprocess.Popen[bytes]) -> None:
    async with asyncio.timeout(60), ControlClient(home) as client:
        while True:
            assert proc.poll() is None, (home / "daemon.log").read_text()[-3000:]
            try:
                await client.status()
                return
            except DaemonUnavailable:
                await asyncio.sleep(0.1)


# -- one sender -------------------------------------------------------------------------


CONNECTING = 100
"""Senders between connecting and their ``accepted`` line, at most.

The control socket listens with aiohttp's default backlog of 128: 1000 clients
connecting in the same instant overflow it, and asyncio then reports the refused
AF_UNIX connect as a connection that closes on the first write. Real clients do not
arrive in the same microsecond; this gate keeps the accept queue under the backlog.
All N stay connected and waiting concurrently once accepted.
"""


async def _send(home: Path, key: str, text: str, gate: asyncio.Semaphore) -> dict[str, Any]:
    """One ``familiar send``-like client: its own ControlClient, streaming."""
    deltas: list[str] = []
    progress = 0
    message_id = ""
    reply: dict[str, Any] = {}
    async with ControlClient(home) as client:
        t0 = time.perf_counter()  # before the gate: waiting to connect counts
        t1 = t0
        await gate.acquire()
        connecting = True
        try:
            async for line in client.send(key, text, stream=True):
                item: dict[str, Any] = line_dict(line)
                kind = item.get("type")
                if kind == "delta":
                    deltas.append(str(item.get("text", "")))
                elif kind == "progress":
                    progress += 1
                elif kind == "accepted":
                    message_id = str(item["message_id"])
                    gate.release()
                    connecting = False
                elif kind in ("reply", "timeout"):
                    t1 = time.perf_counter()
                    reply = item
        finally:
            if connecting:
                gate.release()
    return {
        "key": key,
        "id": message_id,
        "t0": t0,
        "t1": t1,
        "reply": reply,
        "streamed": "".join(deltas),
        "progress": progress,
    }


async def _fake_log(http: aiohttp.ClientSession, fake_root: str, since: int) -> dict[str, Any]:
    async with http.get(f"{fake_root}/_fake/log", params={"since": str(since)}) as r:
        r.raise_for_status()
        body: dict[str, Any] = await r.json()
        return body


async def _burst(
    home: Path, pid: int, http: aiohttp.ClientSession, fake_root: str,
    keys: list[str], tag: str, latency_s: float,
) -> dict[str, Any]:  # fmt: skip
    """N concurrent senders, one message each; returns timings and what the fake served."""
    log_from = (await _fake_log(http, fake_root, 0))["total"]
    cpu0 = _cpu_seconds(pid)
    gate = asyncio.Semaphore(CONNECTING)
    t0 = time.perf_counter()
    results = await asyncio.gather(
        *(_send(home, key, f"{tag}: what do the ops notes say? ({key})", gate) for key in keys)
    )
    total = max(r["t1"] for r in results) - t0
    cpu = _cpu_seconds(pid) - cpu0
    served = (await _fake_log(http, fake_root, log_from))["log"]
    ours = set(keys)
    served = [e for e in served if e["session"] in ours]
    calls = Counter(e["session"] for e in served)
    overheads = [(r["t1"] - r["t0"] - latency_s * calls[r["key"]]) * 1000 for r in results]
    return {
        "results": results,
        "served": served,
        "total_s": total,
        "cpu_s": cpu,
        "overheads_ms": overheads,
    }


# -- counting the work ------------------------------------------------------------------


def _check_burst(burst: dict[str, Any], n: int) -> dict[str, int]:
    """Count what the burst really did, from the clients and the fake's request log."""
    expected_text = prose(REPLY_CHARS).strip()
    results, served = burst["results"], burst["served"]
    per_session = Counter(e["session"] for e in served)
    answers = Counter(e["answer"] for e in served)
    counts = {
        "answered": sum(
            1
            for r in results
            if r["reply"].get("type") == "reply"
            and r["reply"].get("kind") == "reply"
            and r["reply"].get("text") == expected_text
        ),
        "streamed_complete": sum(1 for r in results if r["streamed"].strip() == expected_text),
        "streamed_chars": sum(len(r["streamed"]) for r in results),
        "progress_lines": sum(r["progress"] for r in results),
        "llm_calls": len(served),
        "llm_tool_call_answers": answers["tool_calls"],
        "llm_text_answers": answers["text"],
        "tool_results_seen_by_llm": sum(1 for e in served if e["tool_result_ok"]),
        "sessions_with_2_llm_calls": sum(1 for c in per_session.values() if c == 2),
    }
    want = {
        "answered": n,
        "llm_calls": 2 * n,
        "llm_tool_call_answers": n,
        "llm_text_answers": n,
        "tool_results_seen_by_llm": n,
        "sessions_with_2_llm_calls": n,
    }
    wrong = {k: (counts[k], v) for k, v in want.items() if counts[k] != v}
    assert not wrong, f"burst did not do the expected work (got, want): {wrong}"
    return counts


async def _count_events(home: Path, keys: list[str], ids: set[str]) -> dict[str, int]:
    """Count the event log of ``ids`` via the API behind ``familiar sessions show --events``."""
    found: Counter[str] = Counter()
    idle_llm_calls: Counter[int] = Counter()
    limit = asyncio.Semaphore(16)

    async def one(client: ControlClient, key: str) -> None:
        async with limit:
            detail = await client.session(key, events=True)
        for event in detail["events"]:
            if event["message_id"] not in ids:
                continue
            kind, data = event["type"], event["data"]
            found[kind] += 1
            if kind == "tool.execution_complete":
                ok = data.get("tool") == "read_file" and not data.get("is_error")
                ok = ok and MARKER in str(data.get("result", ""))
                found["read_file_ok"] += int(ok)
            if kind == "session.idle":
                idle_llm_calls[int(data.get("llm_calls", -1))] += 1

    async with ControlClient(home) as client:
        await asyncio.gather(*(one(client, key) for key in keys))
    m = len(ids)
    counts = {
        "user.message": found["user.message"],
        "assistant.turn_start": found["assistant.turn_start"],
        "tool.execution_start": found["tool.execution_start"],
        "tool.execution_complete": found["tool.execution_complete"],
        "read_file_ok": found["read_file_ok"],
        "session.idle(llm_calls=2)": idle_llm_calls[2],
        "session.error": found["session.error"],
    }
    want = {
        "user.message": m,
        "assistant.turn_start": 2 * m,
        "tool.execution_start": m,
        "tool.execution_complete": m,
        "read_file_ok": m,
        "session.idle(llm_calls=2)": m,
        "session.error": 0,
    }
    wrong = {k: (counts[k], v) for k, v in want.items() if counts[k] != v}
    assert not wrong, f"event log does not match the expected work (got, want): {wrong}"
    return counts


def _cli_events(home: Path, key: str) -> Counter[str]:
    """``familiar sessions show KEY --events --json``, run as the real CLI."""
    out = subprocess.run(
        [sys.executable, "-m", "gateway.cli", "sessions", "show", key, "--events", "--json",
         "--home", str(home)],
        cwd=ROOT, env=daemon_env(single=True), capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    return Counter(e["type"] for e in json.loads(out)["events"])


# -- the case ---------------------------------------------------------------------------


async def run_realistic(
    n: int, base_url: str, latency_ms: int, *, launcher: str | None = None
) -> dict[str, Any]:
    """Seed, start the daemon, warm up, two bursts (cold, warm), count, stop.

    ``launcher``: see `_spawn_daemon`.
    """
    home = Path(tempfile.mkdtemp(prefix="fam-bench-", dir="/tmp"))
    fake_root = base_url.removesuffix("/v1")
    latency_s = latency_ms / 1000
    keys = [f"cli:bench-{i}" for i in range(n)]
    warm_key = "cli:bench-warmup"
    proc: subprocess.Popen[bytes] | None = None
    try:
        _write_config(home, base_url, n)
        workspace = home / "workspace"
        (workspace / "notes").mkdir(parents=True)
        (workspace / TOOL_PATH).write_text(NOTES)
        t_seed = time.perf_counter()
        await seed_history(
            f"sqlite+aiosqlite:///{home / 'familiar.db'}", workspace, [warm_key, *keys]
        )
        seed_s = time.perf_counter() - t_seed
        proc = _spawn_daemon(home, launcher)
        await _wait_ready(home, proc)
        async with aiohttp.ClientSession() as http:
            warm = await _burst(home, proc.pid, http, fake_root, [warm_key], "warmup", latency_s)
            _check_burst(warm, 1)
            cold = await _burst(home, proc.pid, http, fake_root, keys, "r0", latency_s)
            warm_round = await _burst(home, proc.pid, http, fake_root, keys, "r1", latency_s)
        peak = _peak_rss_mb(proc.pid)
        work = [_check_burst(b, n) for b in (cold, warm_round)]
        ids = {r["id"] for b in (cold, warm_round) for r in b["results"]}
        events = await _count_events(home, keys, ids)
        # The real CLI sees the same log (one session: each CLI run is a process).
        cli = _cli_events(home, keys[0])
        assert cli["assistant.turn_start"] >= 4 and cli["tool.execution_complete"] >= 2, cli
        total, cpu = warm_round["total_s"], warm_round["cpu_s"]
        overheads = warm_round["overheads_ms"]
        return {
            "case": "realistic",
            "n": n,
            "llm_latency_ms": latency_ms,
            "total_s": round(total, 3),
            "cold_total_s": round(cold["total_s"], 3),
            "throughput_msg_s": round(n / total, 1),
            "cpu_ms_per_msg": round(cpu / n * 1000, 2),
            "cold_cpu_ms_per_msg": round(cold["cpu_s"] / n * 1000, 2),
            "overhead_p50_ms": round(_pct(overheads, 50), 1),
            "overhead_p99_ms": round(_pct(overheads, 99), 1),
            "peak_rss_mb": peak,
            "seed_s": round(seed_s, 1),
            "work": {
                "messages_sent": 2 * n,
                "answered": work[0]["answered"] + work[1]["answered"],
                "llm_calls_served": work[0]["llm_calls"] + work[1]["llm_calls"],
                "tool_results_seen_by_llm": work[0]["tool_results_seen_by_llm"]
                + work[1]["tool_results_seen_by_llm"],
                "streamed_complete": work[0]["streamed_complete"] + work[1]["streamed_complete"],
                "progress_lines": work[0]["progress_lines"] + work[1]["progress_lines"],
                "events": events,
                "cli_events_first_session": dict(cli),
            },
        }
    finally:
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if os.environ.get("FAMILIAR_BENCH_KEEP"):
            print(f"kept {home}", file=sys.stderr)
        else:
            with contextlib.suppress(OSError):
                shutil.rmtree(home)
