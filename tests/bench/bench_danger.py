"""How long the danger check takes to read a command, short and pathological.

Run: ``PYTHONPATH=. .venv/bin/python -m tests.bench.bench_danger [--runs 200]``.
Reads each command ``--runs`` times with the default patterns (the shell is parsed,
then every pattern is matched on the raw line and on each canonical line) and prints
the median and worst time per read, the command's length and the verdict it got.
"""

from __future__ import annotations

import argparse
import statistics
import time

from core.tools.config import ExecConfig
from core.tools.danger import DangerMatcher

COMMANDS = {
    "short harmless": "grep -r mkfs docs/",
    "short dangerous": "cd / && rm -rf *",
    "interpreter code": "python3 -c \"import shutil; shutil.rmtree('/')\"",
    "3000 options": "rm " + "-x " * 3000 + "y",
    "2000 sudo": "sudo " * 2000 + "ls",
    "2000 pipes": "x | " * 2000 + "rm -rf /",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=200)
    runs = parser.parse_args().runs
    matcher = DangerMatcher(ExecConfig().danger_patterns)
    print(f"{'command':<18} {'chars':>6} {'median ms':>10} {'worst ms':>9}  verdict")
    for label, command in COMMANDS.items():
        times = []
        verdict = None
        for _ in range(runs):
            started = time.perf_counter()
            verdict = matcher.reason(command)
            times.append((time.perf_counter() - started) * 1000)
        shown = "runs" if verdict is None else f"asks: {verdict}"
        print(
            f"{label:<18} {len(command):>6} {statistics.median(times):>10.3f} "
            f"{max(times):>9.3f}  {shown[:60]}"
        )


if __name__ == "__main__":
    main()
