"""Webhooks under load: N signed ``"wait": true`` requests from C concurrent clients.

Run: ``PYTHONPATH=. .venv/bin/python -m tests.bench.bench_webhook [--n 1000] [--clients 50]
[--latency-ms 200]``. A spawned daemon (with the webhook plugin) talks to the fake
OpenAI server, a separate process with a fixed latency per LLM call. Each request goes
to its own session and waits for its reply; latency is measured per request from the
client (send to 200 with the reply). The work is counted and checked: every request
answered once with its own echo, one LLM call each, one stored message each.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

from channels.webhook import signed_headers
from gateway.control.client import ControlClient, DaemonUnavailable

ROOT = Path(__file__).resolve().parents[2]
SECRET = "bench-secret"


def _start_fake(latency_ms: int) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.fakes.fake_openai", "--port", "0",
         "--latency-ms", str(latency_ms)],
        cwd=ROOT, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    return proc, f"http://127.0.0.1:{proc.stdout.readline().split()[1]}"


def _write_config(home: Path, fake: str, clients: int) -> None:
    (home / "config.toml").write_text(
        f'[provider]\nkind = "openai"\nbase_url = "{fake}/v1"\nmodel = "fake-model"\n'
        'api_key = "sk-bench"\n\n[http]\nport = 0\n\n'
        f"[agent]\nmax_concurrent_sessions = {clients * 2}\n\n"
        "[channels.webhook]\nenabled = true\n\n"
        f'[channels.webhook.hooks.bench]\nsecret = "{SECRET}"\nrate = 100000\nburst = 100000\n'
    )


def _spawn_daemon(home: Path) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FAMILIAR_")}
    with (home / "daemon.log").open("ab") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "gateway.daemon", "--home", str(home)],
            cwd=ROOT, env={**env, "PYTHONPATH": str(ROOT), "FAMILIAR_GATEWAY__PROCESSES": "single"},
            stdout=log, stderr=log,
        )  # fmt: skip


async def _http_address(home: Path, proc: subprocess.Popen[bytes]) -> str:
    async with asyncio.timeout(60), ControlClient(home) as client:
        while True:
            assert proc.poll() is None, (home / "daemon.log").read_text()[-3000:]
            try:
                status = await client.status()
                if status.get("http"):
                    return str(status["http"])
            except DaemonUnavailable:
                pass
            await asyncio.sleep(0.1)


async def _one(http: aiohttp.ClientSession, url: str, i: int) -> dict[str, Any]:
    text = f"bench message {i}"
    body = json.dumps({"text": text, "session": f"s{i}", "wait": True}).encode()
    headers = {**signed_headers(SECRET, body), "Content-Type": "application/json"}
    started = time.perf_counter()
    async with http.post(url, data=body, headers=headers) as response:
        answer = await response.json()
        status = response.status
    return {
        "i": i,
        "status": status,
        "ok": status == 200 and answer.get("reply") == f"echo: {text}",
        "message_id": answer.get("message_id"),
        "latency": time.perf_counter() - started,
    }


async def _burst(address: str, n: int, clients: int) -> tuple[list[dict[str, Any]], float]:
    url = f"http://{address}/webhook/bench"
    todo: asyncio.Queue[int] = asyncio.Queue()
    for i in range(n):
        todo.put_nowait(i)
    results: list[dict[str, Any]] = []
    connector = aiohttp.TCPConnector(limit=clients)
    timeout = aiohttp.ClientTimeout(total=300)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as http:

        async def client() -> None:
            while not todo.empty():
                results.append(await _one(http, url, todo.get_nowait()))

        started = time.perf_counter()
        await asyncio.gather(*(client() for _ in range(clients)))
        return results, time.perf_counter() - started


def _pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def _stored(home: Path) -> tuple[int, int]:
    with sqlite3.connect(home / "familiar.db") as db:
        inbound = db.execute("select count(*) from inbound where status = 'done'").fetchone()[0]
        replies = db.execute("select count(*) from outbound").fetchone()[0]
    return int(inbound), int(replies)


async def run(n: int, clients: int, latency_ms: int) -> dict[str, Any]:
    home = Path(tempfile.mkdtemp(prefix="fam-bw-", dir="/tmp"))
    fake, fake_url = _start_fake(latency_ms)
    daemon: subprocess.Popen[bytes] | None = None
    try:
        _write_config(home, fake_url, clients)
        daemon = _spawn_daemon(home)
        address = await _http_address(home, daemon)
        results, elapsed = await _burst(address, n, clients)
        async with aiohttp.ClientSession() as http, http.get(f"{fake_url}/_fake/stats") as r:
            llm_calls = (await r.json())["requests"]
        inbound, replies = _stored(home)
    finally:
        for proc in (daemon, fake):
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                proc.wait(30)
        shutil.rmtree(home, ignore_errors=True)
    latencies = [r["latency"] * 1000 for r in results]
    work = {
        "requests": len(results),
        "answered_200_with_own_reply": sum(1 for r in results if r["ok"]),
        "distinct_message_ids": len({r["message_id"] for r in results}),
        "llm_calls": llm_calls,
        "messages_done": inbound,
        "replies_stored": replies,
    }
    return {
        "n": n,
        "clients": clients,
        "llm_latency_ms": latency_ms,
        "total_s": round(elapsed, 3),
        "throughput_per_s": round(n / elapsed, 1),
        "latency_p50_ms": round(_pct(latencies, 50), 1),
        "latency_p99_ms": round(_pct(latencies, 99), 1),
        "work": work,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--latency-ms", type=int, default=200)
    args = parser.parse_args()
    result = asyncio.run(run(args.n, args.clients, args.latency_ms))
    print(json.dumps(result, indent=2))
    expected = {
        "requests": args.n,
        "answered_200_with_own_reply": args.n,
        "distinct_message_ids": args.n,
        "llm_calls": args.n,
        "messages_done": args.n,
        "replies_stored": args.n,
    }
    if result["work"] != expected:
        print(f"FAILED: work done differs from {expected}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
