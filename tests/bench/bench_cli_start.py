"""How fast the ``familiar`` CLI starts: ``--help`` and ``send`` against a running daemon.

Run: ``PYTHONPATH=. .venv/bin/python -m tests.bench.bench_cli_start [--runs 20]``.
Spawns one daemon (``python -m gateway.daemon``, scripted provider, single process, so
the model's time is nil), then runs, one after the other and ``--runs`` times each:

- ``python -c pass``: the bare interpreter, for reference;
- ``python -m gateway.cli --help``;
- ``python -m gateway.cli send "bench N" --session bench``: the CLI's start-up, the
  request over the control socket and the reply (each reply is checked: the scripted
  provider's ``echo: bench N``, exit status 0).

Wall time is from spawning the process to reaping it; peak RSS is the child's
``ru_maxrss`` from ``wait4``. ``--code DIR`` (repeatable) runs the CLI of other
checkouts too (say, the main branch's), interleaved run by run for a fair A/B.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from gateway.control.client import ControlClient
from tests.bench.bench_control import _stop_daemon, _wait_ready

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Case:
    """One command line run from one checkout, and what its runs measured."""

    label: str
    code: Path
    argv: list[str]
    sends: bool = False
    seconds: list[float] = field(default_factory=list)
    rss_kib: list[int] = field(default_factory=list)
    ok: int = 0


def _env(code: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FAMILIAR_")}
    return {**env, "PYTHONPATH": str(code), "COLUMNS": "80"}


def _spawn_daemon(home: Path) -> subprocess.Popen[bytes]:
    env = _env(ROOT) | {
        "FAMILIAR_PROVIDER__KIND": "scripted",
        "FAMILIAR_HTTP__PORT": "0",
        "FAMILIAR_GATEWAY__PROCESSES": "single",
    }
    with (home / "daemon.log").open("wb") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "gateway.daemon", "--home", str(home)],
            stdout=log, stderr=subprocess.STDOUT, env=env, cwd=ROOT,
        )  # fmt: skip


async def _daemon_ready(home: Path, daemon: subprocess.Popen[bytes]) -> None:
    async with ControlClient(home) as client:
        await _wait_ready(client, daemon)


_LAUNCHER = """
import json, os, sys, time
for line in sys.stdin:
    job = json.loads(line)
    with open(job["out"], "wb") as out:
        started = time.perf_counter()
        pid = os.posix_spawn(
            job["argv"][0], job["argv"], job["env"],
            file_actions=[(os.POSIX_SPAWN_DUP2, out.fileno(), 1),
                          (os.POSIX_SPAWN_DUP2, out.fileno(), 2)],
        )
        _, status, usage = os.wait4(pid, 0)
        seconds = time.perf_counter() - started
    print(json.dumps({"seconds": seconds, "code": os.waitstatus_to_exitcode(status),
                      "rss_kib": usage.ru_maxrss}), flush=True)
"""
"""Spawns each run and reports its wall time and ``ru_maxrss``. A child's peak RSS counts
the memory of the process that spawned it (fork, or vfork until exec), so the runs are
spawned by this small interpreter (``-S -I``: no site), not by the benchmark itself."""


class Launcher:
    """The `_LAUNCHER` process: one run at a time."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-S", "-I", "-c", _LAUNCHER],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip

    def run(self, argv: list[str], *, code: Path, out: Path) -> tuple[float, int, int]:
        """Run ``argv`` (stdout and stderr to ``out``) on ``code``: seconds, exit, peak KiB."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        job = {"argv": argv, "env": _env(code), "out": str(out)}
        self.proc.stdin.write(json.dumps(job) + "\n")
        self.proc.stdin.flush()
        answer = json.loads(self.proc.stdout.readline())
        return answer["seconds"], answer["code"], answer["rss_kib"]

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


def _run(launcher: Launcher, case: Case, run: int, out: Path) -> None:
    # -P: the current directory is not on the path, so PYTHONPATH picks the checkout.
    argv = [sys.executable, "-P", *(arg.replace("{n}", str(run)) for arg in case.argv)]
    seconds, code, rss_kib = launcher.run(argv, code=case.code, out=out)
    case.seconds.append(seconds)
    case.rss_kib.append(rss_kib)
    printed = out.read_text(errors="replace")
    good = code == 0 and (not case.sends or printed.strip() == f"echo: bench {run}")
    case.ok += good
    if not good:
        print(f"{case.label} run {run}: exit {code}: {printed[-500:]}", flush=True)


def _pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


def _cases(codes: list[Path], home: Path) -> list[Case]:
    cases = []
    for code in codes:
        tag = "" if code == ROOT else f" [{code}]"
        cases += [
            Case(f"--help{tag}", code, ["-m", "gateway.cli", "--help"]),
            Case(
                f"send{tag}",
                code,
                ["-m", "gateway.cli", "send", "bench {n}", "--session", "bench",
                 "--home", str(home)],
                sends=True,
            ),
        ]  # fmt: skip
    return [Case("python -c pass", ROOT, ["-c", "pass"]), *cases]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--code", type=Path, action="append", default=[])
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="fam-cs-", dir="/tmp"))
    daemon = _spawn_daemon(home)
    launcher = Launcher()
    try:
        asyncio.run(_daemon_ready(home, daemon))
        cases = _cases([ROOT, *(c.resolve() for c in args.code)], home)
        out = home / "run.out"
        for case in cases:
            _run(launcher, case, -1, out)  # warm up: page cache, .pyc files, first turn
            case.seconds.clear()
            case.rss_kib.clear()
            case.ok = 0
        for run in range(args.runs):
            for case in cases:
                _run(launcher, case, run, out)
    finally:
        launcher.close()
        _stop_daemon(daemon, home)
    print(f"{args.runs} runs of each command (after one warm-up run each)")
    print("| command | runs ok | p50 s | p90 s | max RSS MiB |")
    print("|---|---:|---:|---:|---:|")
    for case in cases:
        rss = max(case.rss_kib, default=0) / 1024
        print(
            f"| {case.label} | {case.ok}/{args.runs} | {_pct(case.seconds, 50):.3f} "
            f"| {_pct(case.seconds, 90):.3f} | {rss:.0f} |"
        )
    sends = [c for c in cases if c.sends]
    print(f"send replies checked: {sum(c.ok for c in sends)}/{args.runs * len(sends)}")


if __name__ == "__main__":
    main()
