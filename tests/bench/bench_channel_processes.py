"""``gateway.channel_processes``: what the per-channel front costs, and how fast a channel
process comes back.

Run: ``PYTHONPATH=. .venv/bin/python -m tests.bench.bench_channel_processes`` (defaults:
2 rounds of each mode, interleaved; ``--rounds 1 --n 100`` is a quick run).

A spawned supervisor (``python -m gateway.daemon --home H``, one agent worker, the
webhook channel enabled, the fake OpenAI-compatible server with no latency) in mode
``one`` (the webhook channel in the ``channels`` process) and ``per-channel`` (in
``channel:webhook``, its routes forwarded by the front over a Unix socket):

- **ack latency**: ``--n`` signed ``POST /webhook/<hook>`` one after another, not
  waiting for the reply (the answer comes once the message is stored): p50/p95 ms.
- **reply latency**: ``--n`` / 4 requests with ``"wait": true`` (the agent's echo):
  p50/p95 ms.
- **ack throughput**: ``--clients`` concurrent senders, ``--n`` requests in all: req/s.
- **idle memory** of the process tree (supervisor, zygote and roles) once ready: the
  sum of PSS (a page shared by k processes counts 1/k in each).
- **recovery** (per-channel only): kill -9 of the webhook process, then a request every
  50 ms until one is answered 2xx again: seconds, and the 503 answers meanwhile.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

from channels.webhook import signed_headers
from tests.bench.bench_processes import _Gateway, _memory_mib, _pct, _start_fake, _tree

SECRET = "bench-secret"


def _write_config(home: Path, base_url: str, mode: str) -> None:
    (home / "config.toml").write_text(
        f'[provider]\nkind = "openai"\nbase_url = "{base_url}"\n'
        'model = "fake-model"\napi_key = "sk-test"\n\n[http]\nport = 0\n\n'
        f'[gateway]\nprocesses = "multi"\nagent_workers = 1\nchannel_processes = "{mode}"\n\n'
        "[channels.webhook]\nenabled = true\n\n"
        f'[channels.webhook.hooks.bench]\nsecret = "{SECRET}"\nrate = 100000\nburst = 100000\n'
    )


async def _post(http: aiohttp.ClientSession, base: str, text: str, *, wait: bool) -> int:
    body = json.dumps({"text": text, "session": "bench", "wait": wait}).encode()
    headers = {"Content-Type": "application/json", **signed_headers(SECRET, body)}
    async with http.post(base + "/webhook/bench", data=body, headers=headers) as response:
        await response.read()
        return response.status


async def _timed(http: aiohttp.ClientSession, base: str, text: str, *, wait: bool) -> float:
    started = time.perf_counter()
    status = await _post(http, base, text, wait=wait)
    assert status < 300, status
    return (time.perf_counter() - started) * 1000


async def _webhook_running(home: Path) -> str:
    """Wait until the webhook channel runs; returns the HTTP base URL."""
    from gateway.control.client import ControlClient

    async with asyncio.timeout(180), ControlClient(home) as client:
        while True:
            status = await client.status()
            hook = next(c for c in status["channels"] if c["name"] == "webhook")
            if hook["state"] == "running":
                return f"http://{status['http']}"
            await asyncio.sleep(0.1)


async def _recovery(home: Path, http: aiohttp.ClientSession, base: str) -> dict[str, Any]:
    table = json.loads((home / "run" / "processes.json").read_text())
    pid = next(p["pid"] for p in table["processes"] if p["name"] == "channel:webhook")
    os.kill(pid, signal.SIGKILL)
    started = time.perf_counter()
    refused = 0
    while True:
        status = await _post(http, base, "after the kill", wait=False)
        if status < 300:
            return {"recovery_s": round(time.perf_counter() - started, 2), "503s": refused}
        assert status == 503, status
        refused += 1
        await asyncio.sleep(0.05)


async def one_run(base_url: str, mode: str, n: int, clients: int) -> dict[str, Any]:
    home = Path(tempfile.mkdtemp(prefix="fam-bcp-", dir="/tmp"))
    try:
        _write_config(home, base_url, mode)
        gateway = _Gateway(home)
        try:
            await gateway.wait_ready(multi=True)
            base = await _webhook_running(home)
            tree = _tree(gateway.proc.pid)
            pss = round(sum(_memory_mib(pid)["pss"] for pid in tree), 1)
            async with aiohttp.ClientSession() as http:
                for i in range(20):  # warm up
                    await _timed(http, base, f"warm {i}", wait=False)
                acks = [await _timed(http, base, f"ack {i}", wait=False) for i in range(n)]
                replies = [await _timed(http, base, f"r {i}", wait=True) for i in range(n // 4)]
                gate = asyncio.Semaphore(clients)

                async def one(i: int) -> None:
                    async with gate:
                        await _timed(http, base, f"c {i}", wait=False)

                started = time.perf_counter()
                await asyncio.gather(*(one(i) for i in range(n)))
                rate = n / (time.perf_counter() - started)
                row: dict[str, Any] = {
                    "mode": mode,
                    "ack_p50_ms": round(_pct(acks, 50), 1),
                    "ack_p95_ms": round(_pct(acks, 95), 1),
                    "reply_p50_ms": round(_pct(replies, 50), 1),
                    "reply_p95_ms": round(_pct(replies, 95), 1),
                    f"ack_req_s_{clients}_clients": round(rate),
                    "processes": len(tree),
                    "pss_total_mib": pss,
                }
                if mode == "per-channel":
                    row |= await _recovery(home, http, base)
        finally:
            gateway.stop()
        return row
    finally:
        shutil.rmtree(home, ignore_errors=True)


async def _main(args: argparse.Namespace) -> None:
    fake, base_url = _start_fake(0)
    try:
        for _ in range(args.rounds):
            for mode in ("one", "per-channel"):
                row = await one_run(base_url, mode, args.n, args.clients)
                print("  " + "  ".join(f"{k}={v}" for k, v in row.items()), flush=True)
    finally:
        fake.terminate()
        fake.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--n", type=int, default=400)
    parser.add_argument("--clients", type=int, default=20)
    asyncio.run(_main(parser.parse_args()))


if __name__ == "__main__":
    main()
