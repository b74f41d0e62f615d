"""What the first ``make run`` costs: the venv it builds on a fresh clone.

Run: ``PYTHONPATH=. .venv/bin/python -m tests.bench.bench_install [--rounds 2]
[--against REF TARGET]``.

Each round clones this checkout's HEAD under /tmp and times ``make -C CLONE venv-run``
(what ``make run`` builds before it starts the gateway), from another directory and
with no stdin, then counts the venv's packages and the test and lint tools among them
(there must be none). ``--against REF TARGET`` times ``make TARGET`` on a clone checked
out at REF too, interleaved (e.g. ``--against 45e9e20 venv``: the commit before the
lock files, whose ``make run`` installed the dev tools). pip's cache is whatever this
machine has; the first round warms it.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from tests.unit.test_locks import DEV_TOOLS

ROOT = Path(__file__).resolve().parents[2]


def _install(ref: str | None, target: str) -> dict[str, object]:
    where = Path(tempfile.mkdtemp(prefix="fam-install-", dir="/tmp"))
    try:
        clone = where / "clone"
        subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True)
        if ref is not None:
            subprocess.run(["git", "-C", str(clone), "checkout", "--quiet", ref], check=True)
        started = time.perf_counter()
        made = subprocess.run(
            ["make", "-C", str(clone), target],
            cwd=where, stdin=subprocess.DEVNULL, capture_output=True, text=True,
        )  # fmt: skip
        seconds = time.perf_counter() - started
        assert made.returncode == 0, made.stdout[-2000:] + made.stderr[-2000:]
        listed = subprocess.run(
            [str(clone / ".venv/bin/python"), "-m", "pip", "list", "--format", "json",
             "--disable-pip-version-check"],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        names = {p["name"].lower() for p in json.loads(listed.stdout)}
        return {
            "code": ref or "HEAD",
            "target": target,
            "seconds": round(seconds, 1),
            "packages": len(names),
            "dev_tools": sorted(t for t in DEV_TOOLS if t in names),
        }
    finally:
        shutil.rmtree(where, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--against", nargs=2, metavar=("REF", "TARGET"))
    args = parser.parse_args()
    arms: list[tuple[str | None, str]] = [(None, "venv-run")]
    if args.against:
        arms.append((args.against[0], args.against[1]))
    print("| round | code | make target | seconds | packages | test/lint tools |")
    print("|---:|---|---|---:|---:|---|")
    for round_ in range(1, args.rounds + 1):
        for ref, target in arms if round_ % 2 else arms[::-1]:
            row = _install(ref, target)
            tools = ", ".join(row["dev_tools"]) or "none"  # type: ignore[arg-type]
            print(
                f"| {round_} | {row['code']} | {target} | {row['seconds']} | "
                f"{row['packages']} | {tools} |",
                flush=True,
            )
            if ref is None:
                assert not row["dev_tools"], f"make run's venv holds {row['dev_tools']}"


if __name__ == "__main__":
    main()
