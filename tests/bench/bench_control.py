"""The control API under load: N concurrent streaming senders against a real daemon.

Run: ``PYTHONPATH=. .venv/bin/python -m tests.bench.bench_control [--sizes 1 100 1000]``.
Each size spawns a fresh daemon (``python -m gateway.daemon``, scripted provider, so no
LLM time is counted) and drives it over the Unix socket with one `ControlClient`, each
sender on its own session. Daemon CPU comes from ``/proc/<pid>/stat`` around the
measured round, peak RSS from ``VmHWM``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from gateway.control.client import ControlClient, DaemonUnavailable
from gateway.control.protocol import DeltaLine, ReplyLine

ROOT = Path(__file__).resolve().parents[2]
_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Result:
    n: int
    answered: int
    seconds: float
    cpu_ms_per_msg: float
    peak_rss_mb: float
    p50_ms: float
    p99_ms: float

    @property
    def rate(self) -> float:
        return self.answered / self.seconds if self.seconds else 0.0


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS  # utime + stime


def _peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


def _spawn(home: Path, n: int) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FAMILIAR_")}
    env.update(
        PYTHONPATH=str(ROOT),
        FAMILIAR_PROVIDER__KIND="scripted",
        FAMILIAR_HTTP__PORT="0",
        FAMILIAR_GATEWAY__PROCESSES="single",
        FAMILIAR_AGENT__MAX_CONCURRENT_SESSIONS=str(max(n, 32)),
    )
    log = (home / "daemon.log").open("wb")
    return subprocess.Popen(
        [sys.executable, "-m", "gateway.daemon", "--home", str(home)],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
        cwd=ROOT,
    )


async def _wait_ready(client: ControlClient, daemon: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            await client.status()
            return
        except DaemonUnavailable:
            if daemon.poll() is not None or time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.1)


async def _one(client: ControlClient, i: int) -> float | None:
    """Send one streaming message; its latency in seconds if the answer checks out."""
    text = f"bench message {i}"
    start = time.perf_counter()
    deltas: list[str] = []
    final = None
    async for line in client.send(f"cli:bench-{i}", text, stream=True, timeout=600):
        if isinstance(line, DeltaLine):
            deltas.append(line.text)
        elif isinstance(line, ReplyLine):
            final = line
    elapsed = time.perf_counter() - start
    ok = final is not None and final.text == f"echo: {text}" == "".join(deltas)
    return elapsed if ok else None


async def run_case(n: int) -> Result:
    home = Path(tempfile.mkdtemp(prefix="fam-b-", dir="/tmp"))
    daemon = _spawn(home, n)
    try:
        async with ControlClient(home, connect_timeout=60) as client:
            await _wait_ready(client, daemon)
            await _one(client, -1)  # warm up: first statements, first turn
            cpu0, t0 = _cpu_seconds(daemon.pid), time.perf_counter()
            latencies = await asyncio.gather(*(_one(client, i) for i in range(n)))
            seconds = time.perf_counter() - t0
            cpu = _cpu_seconds(daemon.pid) - cpu0
            rss = _peak_rss_mb(daemon.pid)
        ok = [x for x in latencies if x is not None]
        return Result(
            n=n,
            answered=len(ok),
            seconds=seconds,
            cpu_ms_per_msg=cpu * 1000 / n,
            peak_rss_mb=rss,
            p50_ms=_pct(ok, 50) * 1000 if ok else 0.0,
            p99_ms=_pct(ok, 99) * 1000 if ok else 0.0,
        )
    finally:
        _stop_daemon(daemon, home)


def _stop_daemon(daemon: subprocess.Popen[bytes], home: Path) -> None:
    """SIGTERM (SIGKILL after 60 s) and remove its home."""
    daemon.send_signal(signal.SIGTERM)
    try:
        daemon.wait(timeout=60)
    except subprocess.TimeoutExpired:
        daemon.kill()
        daemon.wait()
    shutil.rmtree(home, ignore_errors=True)


def _table(results: list[Result]) -> str:
    rows = [
        "| senders | answered (checked) | total s | msgs/s | daemon CPU ms/msg "
        "| daemon peak RSS MB | p50 ms | p99 ms |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        rows.append(
            f"| {r.n} | {r.answered}/{r.n} | {r.seconds:.2f} | {r.rate:.0f} "
            f"| {r.cpu_ms_per_msg:.2f} | {r.peak_rss_mb:.0f} | {r.p50_ms:.0f} | {r.p99_ms:.0f} |"
        )
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 100, 1000])
    args = parser.parse_args()
    results = []
    for n in args.sizes:
        result = asyncio.run(run_case(n))
        print(
            f"N={n}: answered {result.answered}/{n} in {result.seconds:.2f} s "
            f"({result.rate:.0f} msg/s), daemon CPU {result.cpu_ms_per_msg:.2f} ms/msg, "
            f"peak RSS {result.peak_rss_mb:.0f} MB, "
            f"latency p50 {result.p50_ms:.0f} ms p99 {result.p99_ms:.0f} ms",
            flush=True,
        )
        results.append(result)
    print()
    print(_table(results))


if __name__ == "__main__":
    main()
