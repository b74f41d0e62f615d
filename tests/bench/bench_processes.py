"""The multi-process gateway: scale-out by agent workers, idle memory, wake-up latency.

Run: ``PYTHONPATH=. .venv/bin/python -m tests.bench.bench_processes`` (defaults: 1000
sessions x 1 message; main, single, and 1, 2 and 4 agent workers; SQLite and PostgreSQL
when reachable;
``--sessions 50 --workers 1 --backends sqlite --pings 100`` is a quick run).

- **throughput**: a spawned gateway (``python -m gateway.daemon --home H``): the
  supervisor (``gateway.processes = "multi"``) with W agent workers, or the ``main``
  (the default) or ``single`` mode, for comparison, against the fake
  OpenAI-compatible server (a separate process, ``--latency-ms`` per call, 200 by
  default). N senders, one ``cli:`` session each, send one message each through the
  control socket (``ControlClient``, no streaming) at once; the wall time runs from
  the first send to the last reply. Every reply is checked (the echo of its own text)
  and the fake's request count must equal N. CPU per message is read from ``/proc``
  for every role and the supervisor, and apart from them for the harness on the same
  cores: the senders (this process) and the fake LLM. ``write_lock_s``: the seconds the
  processes' SQLite writers held and waited for the shared write lock over the run (each
  writer logs them when it closes; 0 on PostgreSQL).
- **idle memory**: every process of the tree (supervisor, zygote, roles; from
  ``/proc/PID/smaps_rollup``) once ready and idle, for ``single`` and for ``multi``
  with 1 and 2 agent workers: RSS, PSS (a page shared by k processes counts 1/k in
  each, so the PSS total is what the tree really costs) and USS (private pages), and
  each role's start-to-ready time from the supervisor's log.
- **wake-up latency**: one-way latency of a wake-up from this process to another
  (a child process listening), over the Unix datagram sockets (SQLite's) and over
  PostgreSQL NOTIFY; both clocks are the system-wide CLOCK_MONOTONIC. Pings are sent
  one per event-loop iteration, 2 ms apart (no coalescing).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

from core.bus.wake_pg import PgWakeups
from core.bus.wake_socket import SocketWakeups
from core.bus.wakeups import WakeupService
from gateway.control.client import ControlClient, DaemonUnavailable
from gateway.control.protocol import line_dict
from tests.daemon_env import daemon_env

ROOT = Path(__file__).resolve().parents[2]
CONNECTING = 100
"""Senders between connecting and ``accepted`` at most (the socket's backlog is 128)."""


def _pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


def _start_fake(latency_ms: int) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.fakes.fake_openai", "--port", "0",
         "--latency-ms", str(latency_ms)],
        cwd=ROOT, env=daemon_env(), stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith("PORT "), line
    return proc, f"http://127.0.0.1:{int(line.split()[1])}/v1"


def _write_config(home: Path, base_url: str, *, processes: str, workers: int, store: str) -> None:
    store_table = f'[store]\nurl = "{store}"\n\n' if store else ""
    (home / "config.toml").write_text(
        f'{store_table}[provider]\nkind = "openai"\nbase_url = "{base_url}"\n'
        'model = "fake-model"\napi_key = "sk-test"\n\n[http]\nport = 0\n\n'
        "[agent]\nmax_concurrent_sessions = 2000\n\n"
        f'[gateway]\nprocesses = "{processes}"\nagent_workers = {workers}\n'
    )


class _Gateway:
    """A spawned ``python -m gateway.daemon --home HOME`` (supervisor or single)."""

    def __init__(self, home: Path) -> None:
        self.home = home
        with (home / "daemon.log").open("ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "gateway.daemon", "--home", str(home)],
                cwd=ROOT, env=daemon_env(), stdout=log, stderr=log,
            )  # fmt: skip

    async def wait_ready(self, *, multi: bool) -> float:
        started = time.perf_counter()
        async with asyncio.timeout(180), ControlClient(self.home) as client:
            while True:
                assert self.proc.poll() is None, (self.home / "daemon.log").read_text()[-3000:]
                try:
                    status = await client.status()
                except DaemonUnavailable:
                    await asyncio.sleep(0.1)
                    continue
                states = {p.get("state") for p in status.get("processes") or []}
                if not multi or states == {"running"}:
                    return time.perf_counter() - started
                await asyncio.sleep(0.1)

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(120)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of ``pid`` so far (0 when it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _roles(home: Path, supervisor: int) -> dict[str, int]:
    """Role name -> pid (the single process is ``single``)."""
    try:
        body = json.loads((home / "run" / "processes.json").read_text())
    except (OSError, ValueError):
        return {"single": supervisor}
    return {p["name"]: p["pid"] for p in body["processes"] if p.get("pid")}


def _tree(root: int) -> list[int]:
    """``root`` and every process below it (the supervisor's zygote too)."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                status = (entry / "status").read_text()
            except OSError:
                continue
            ppid = int(next(x.split()[1] for x in status.splitlines() if x.startswith("PPid:")))
            parents.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(parents.get(pid, []))
    return found


def _memory_mib(pid: int) -> dict[str, float]:
    """RSS, PSS (shared pages split between their users) and USS (private) of ``pid``."""
    fields: dict[str, float] = {"rss": 0.0, "pss": 0.0, "uss": 0.0}
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return fields
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        kib = rest.split()[0] if rest.split() else "0"
        if key == "Rss":
            fields["rss"] += int(kib) / 1024
        elif key == "Pss":
            fields["pss"] += int(kib) / 1024
        elif key in ("Private_Clean", "Private_Dirty"):
            fields["uss"] += int(kib) / 1024
    return fields


def _process_names(home: Path, root: int) -> dict[int, str]:
    """pid -> ``supervisor``, ``zygote`` or the role's name (``agent-1``...)."""
    names = {pid: name for name, pid in _roles(home, root).items()}
    names.setdefault(root, "supervisor")
    if names[root] == "single":
        return names
    try:
        log = (home / "daemon.log").read_text(errors="replace")
        names[int(log.split("zygote started pid=")[1].split('"')[0])] = "zygote"
    except (OSError, IndexError, ValueError):
        pass
    return names


def _log_records(log: str) -> Iterator[tuple[dict[str, Any], str]]:
    """Each JSON line of a daemon log, with its message (other lines are skipped)."""
    for line in log.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        yield record, str(record.get("msg", ""))


def _write_lock_s(log: str) -> dict[str, float]:
    """Seconds the processes' SQLite writers held, and waited for, the shared write lock
    over the whole run (from the line each writer logs when it closes)."""
    totals = {"held": 0.0, "waited": 0.0}
    for _, msg in _log_records(log):
        if msg.startswith("sqlite writer closed"):
            fields = dict(part.split("=", 1) for part in msg.split() if "=" in part)
            totals["held"] += float(fields["lock_held_s"])
            totals["waited"] += float(fields["lock_wait_s"])
    return {name: round(value, 3) for name, value in totals.items()}


def _role_ready_s(log: str) -> dict[str, float]:
    """Each role's start (the supervisor forks or spawns it) to its ``READY=1``."""
    started: dict[str, float] = {}
    ready: dict[str, float] = {}
    for record, msg in _log_records(log):
        if msg.startswith("started role="):
            started[msg.split()[1].removeprefix("role=")] = record["ts"]
        elif msg.startswith("role=") and msg.endswith(" ready"):
            ready[msg.split()[0].removeprefix("role=")] = record["ts"]
    return {r: round(ready[r] - started[r], 3) for r in sorted(ready) if r in started}


# -- throughput --------------------------------------------------------------------------


async def _send(home: Path, key: str, text: str, gate: asyncio.Semaphore) -> dict[str, Any]:
    async with ControlClient(home) as client:
        await gate.acquire()
        connecting = True
        reply: dict[str, Any] = {}
        try:
            async for line in client.send(key, text, stream=False, timeout=300):
                item: dict[str, Any] = line_dict(line)
                if item.get("type") == "accepted":
                    gate.release()
                    connecting = False
                elif item.get("type") in ("reply", "timeout"):
                    reply = item
        finally:
            if connecting:
                gate.release()
    return {"key": key, "text": text, "reply": reply, "t1": time.perf_counter()}


def _per_msg(cpu_s: dict[str, float], sessions: int) -> dict[str, float]:
    return {name: round(c * 1000 / sessions, 2) for name, c in sorted(cpu_s.items())}


async def _fake_requests(base_url: str) -> int:
    import aiohttp

    root = base_url.removesuffix("/v1")
    async with aiohttp.ClientSession() as http, http.get(f"{root}/_fake/stats") as r:
        body = await r.json()
    return int(body["requests"])


async def throughput(
    *, base_url: str, fake_pid: int, backend: str, store: str, workers: str, sessions: int
) -> dict[str, Any]:
    home = Path(tempfile.mkdtemp(prefix="fam-bp-", dir="/tmp"))
    try:
        mode = workers if workers in ("main", "single") else "multi"
        count = int(workers) if mode == "multi" else 1
        _write_config(home, base_url, processes=mode, workers=count, store=store)
        gateway = _Gateway(home)
        try:
            ready = await gateway.wait_ready(multi=mode == "multi")
            before = await _fake_requests(base_url)
            roles = _roles(home, gateway.proc.pid)
            if mode == "multi":  # the supervisor takes the roles' metrics and reports
                roles["supervisor"] = gateway.proc.pid
            cpu_before = {name: _cpu_s(pid) for name, pid in roles.items()}
            harness_before = {"senders": _cpu_s(os.getpid()), "fake_llm": _cpu_s(fake_pid)}
            gate = asyncio.Semaphore(CONNECTING)
            t0 = time.perf_counter()
            results = await asyncio.gather(
                *(_send(home, f"cli:bench{i}", f"hello {i}", gate) for i in range(sessions))
            )
            wall = max(r["t1"] for r in results) - t0
            cpu = {name: _cpu_s(pid) - cpu_before[name] for name, pid in roles.items()}
            harness = {
                "senders": _cpu_s(os.getpid()) - harness_before["senders"],
                "fake_llm": _cpu_s(fake_pid) - harness_before["fake_llm"],
            }
            served = await _fake_requests(base_url) - before
        finally:
            code = gateway.stop()
        wrong = [r for r in results if r["reply"].get("text") != f"echo: {r['text']}"]
        assert not wrong, f"{len(wrong)} wrong or missing replies, e.g. {wrong[:2]}"
        assert served == sessions, f"the fake served {served} calls for {sessions} messages"
        latencies = sorted(r["t1"] - t0 for r in results)
        return {
            "backend": backend,
            "workers": workers,
            "sessions": sessions,
            "replies": len(results) - len(wrong),
            "llm_calls": served,
            "wall_s": round(wall, 3),
            "msg_per_s": round(sessions / wall, 1),
            "p50_s": round(_pct(latencies, 50), 3),
            "p99_s": round(_pct(latencies, 99), 3),
            "ready_s": round(ready, 2),
            "cpu_ms_per_msg": _per_msg(cpu, sessions),
            "harness_cpu_ms_per_msg": _per_msg(harness, sessions),
            "write_lock_s": _write_lock_s((home / "daemon.log").read_text(errors="replace")),
            "exit": code,
        }
    finally:
        shutil.rmtree(home, ignore_errors=True)


# -- idle memory -------------------------------------------------------------------------


async def idle_rss(*, base_url: str, processes: str, workers: int) -> dict[str, Any]:
    home = Path(tempfile.mkdtemp(prefix="fam-bp-", dir="/tmp"))
    try:
        _write_config(home, base_url, processes=processes, workers=workers, store="")
        gateway = _Gateway(home)
        try:
            ready = await gateway.wait_ready(multi=processes == "multi")
            await asyncio.sleep(3)  # idle
            per = {pid: _memory_mib(pid) for pid in _tree(gateway.proc.pid)}
            names = _process_names(home, gateway.proc.pid)
            log = (home / "daemon.log").read_text(errors="replace")
        finally:
            gateway.stop()
        roles = _role_ready_s(log)
        return {
            "mode": processes if processes != "multi" else f"multi, {workers} agent worker(s)",
            "processes": len(per),
            "pss_total_mib": round(sum(m["pss"] for m in per.values()), 1),
            "rss_total_mib": round(sum(m["rss"] for m in per.values()), 1),
            "pss_rss_uss_mib": {
                names.get(pid, str(pid)): [round(m[k], 1) for k in ("pss", "rss", "uss")]
                for pid, m in per.items()
            },
            "ready_s": round(ready, 2),
            "role_ready_s": roles or "-",
        }
    finally:
        shutil.rmtree(home, ignore_errors=True)


# -- wake-up latency ---------------------------------------------------------------------


def _wakeups(kind: str, target: str) -> WakeupService:
    return SocketWakeups(Path(target)) if kind == "socket" else PgWakeups(target)


async def _wake_child(kind: str, target: str, count: int) -> None:
    """The listening process: records each ping's one-way latency, prints them at the end."""
    wake = _wakeups(kind, target)
    done = asyncio.Event()
    latencies: list[float] = []

    def ping(data: str, _peer: str) -> None:
        latencies.append((time.monotonic_ns() - int(data)) / 1e6)
        if len(latencies) >= count:
            done.set()

    wake.on("ping", ping)
    await wake.start()
    print("READY", flush=True)
    try:
        async with asyncio.timeout(120):
            await done.wait()
    finally:
        await wake.stop()
    print(json.dumps(latencies), flush=True)


async def wake_latency(kind: str, target: str, pings: int) -> dict[str, Any]:
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.bench.bench_processes", "--wake-child", kind, target,
        "--pings", str(pings), cwd=ROOT, env=daemon_env(), stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert child.stdout is not None
    line = await asyncio.wait_for(child.stdout.readline(), 60)
    assert line.strip() == b"READY", line
    wake = _wakeups(kind, target)
    await wake.start()
    try:
        await asyncio.sleep(0.5)  # the child's hello arrived, it is a known peer
        for _ in range(pings):
            wake.announce(("ping", str(time.monotonic_ns())))
            await asyncio.sleep(0.002)
        out = await asyncio.wait_for(child.stdout.read(), 120)
    finally:
        await wake.stop()
        await child.wait()
    latencies: list[float] = json.loads(out)
    assert len(latencies) == pings, f"{len(latencies)} of {pings} pings arrived"
    return {
        "channel": "unix datagram" if kind == "socket" else "postgresql notify",
        "pings": pings,
        "received": len(latencies),
        "p50_ms": round(_pct(latencies, 50), 3),
        "p99_ms": round(_pct(latencies, 99), 3),
        "max_ms": round(max(latencies), 3),
    }


# -- main --------------------------------------------------------------------------------


def _print(title: str, rows: list[dict[str, Any]]) -> None:
    print(f"\n{title}")
    for row in rows:
        print("  " + "  ".join(f"{k}={v}" for k, v in row.items()))


async def _with_pg(run: Callable[[str], Any]) -> Any:
    """Run ``run(url)`` on a fresh PostgreSQL database; None when PG is unreachable."""
    from tests.conftest import fresh_pg_database

    context: AbstractAsyncContextManager[str] = fresh_pg_database()
    try:
        url = await context.__aenter__()
    except BaseException as exc:  # pytest.skip raises a BaseException
        print(f"(PostgreSQL skipped: {exc})")
        return None
    try:
        return await run(url)
    finally:
        await context.__aexit__(None, None, None)


async def _throughput_row(
    args: argparse.Namespace, fake: subprocess.Popen[str], base_url: str, backend: str, workers: str
) -> dict[str, Any] | None:
    def run(store: str) -> Any:
        return throughput(
            base_url=base_url, fake_pid=fake.pid, backend=backend, store=store,
            workers=workers, sessions=args.sessions,
        )  # fmt: skip

    if backend == "sqlite":
        row: dict[str, Any] = await run("")
        return row
    found: dict[str, Any] | None = await _with_pg(run)
    return found


async def _main(args: argparse.Namespace) -> None:
    fake, base_url = _start_fake(args.latency_ms)
    try:
        if "wake" in args.parts:
            rows = []
            with tempfile.TemporaryDirectory(prefix="fam-wake-") as tmp:
                rows.append(await wake_latency("socket", str(Path(tmp) / "wake"), args.pings))
            if "postgres" in args.backends:
                pg = await _with_pg(lambda url: wake_latency("pg", url, args.pings))
                if pg is not None:
                    rows.append(pg)
            _print("cross-process wake-up latency (one way)", rows)
        if "rss" in args.parts:
            rows = [
                await idle_rss(base_url=base_url, processes=mode, workers=1)
                for mode in ("main", "single")
            ]
            for workers in (1, 2):
                rows.append(await idle_rss(base_url=base_url, processes="multi", workers=workers))
            _print("idle memory of the process tree (MiB; PSS counts a shared page once)", rows)
        if "throughput" in args.parts:
            rows = []
            for backend in args.backends:
                for workers in args.workers:
                    row = await _throughput_row(args, fake, base_url, backend, workers)
                    if row is not None:
                        rows.append(row)
            _print(f"{args.sessions} sessions x 1 message, {args.latency_ms} ms per LLM call", rows)
    finally:
        fake.terminate()
        fake.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument(
        "--workers", nargs="+", default=["main", "single", "1", "2", "4"],
        help="agent workers of a multi run (a number), or the mode main or single",
    )  # fmt: skip
    parser.add_argument(
        "--backends", nargs="+", default=["sqlite", "postgres"], choices=["sqlite", "postgres"]
    )
    parser.add_argument(
        "--parts", nargs="+", default=["wake", "rss", "throughput"],
        choices=["wake", "rss", "throughput"],
    )  # fmt: skip
    parser.add_argument("--latency-ms", type=int, default=200)
    parser.add_argument("--pings", type=int, default=1000)
    parser.add_argument("--wake-child", nargs=2, metavar=("KIND", "TARGET"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.wake_child:
        asyncio.run(_wake_child(args.wake_child[0], args.wake_child[1], args.pings))
        return
    asyncio.run(_main(args))


if __name__ == "__main__":
    main()
