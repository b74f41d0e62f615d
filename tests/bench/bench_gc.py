"""Does the gateway's garbage-collector setting pay? An A/B in one sitting.

Run: ``PYTHONPATH=. .venv/bin/python -m tests.bench.bench_gc [--rounds 3] [--n 1000]``.

`gateway.collector.settle_after_start` freezes what startup allocated (``gc.freeze()``)
and raises the young-generation threshold from 700 to
`gateway.collector.YOUNG_THRESHOLD`. An interpreter-wide setting stays only where it
shows a gain users feel (issue 24), so this runs the realistic case
(:mod:`tests.bench.realistic`: a single-process daemon, N senders over the control
socket, 50 turns of history, a tool call and a streamed answer per message, the fake
LLM at ``--latency-ms``) with the setting (``tuned``) and without it (``default``:
the daemon is started by a launcher that makes ``gc.freeze`` and ``gc.set_threshold``
do nothing, so CPython's defaults stay), alternating arm by arm, ``--rounds`` times each.

Printed per arm: the warm burst's wall time and the daemon's CPU per message (each
run's value, and the median), then the difference of the medians and whether it is
beyond the run-to-run spread (the two arms' ranges do not overlap).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
from typing import Any

from tests.bench.realistic import run_realistic, start_fake_realistic

DEFAULT_GC = """
import gc, runpy
# The A/B's other arm: CPython's collector as it comes, whatever the daemon asks for.
gc.freeze = lambda: None
gc.set_threshold = lambda *thresholds: None
runpy.run_module("gateway.daemon", run_name="__main__", alter_sys=True)
"""
"""The ``default`` arm's daemon: ``python -c DEFAULT_GC --home H``."""

ARMS = {"tuned": None, "default": DEFAULT_GC}


def _row(arm: str, runs: list[dict[str, Any]], key: str) -> str:
    values = [float(r[key]) for r in runs]
    shown = ", ".join(f"{v:g}" for v in values)
    middle, low, high = statistics.median(values), min(values), max(values)
    return f"| {arm} | {key} | {middle:.4g} | {low:.4g} to {high:.4g} | {shown} |"


def _verdict(runs: dict[str, list[dict[str, Any]]], key: str) -> str:
    tuned = [float(r[key]) for r in runs["tuned"]]
    default = [float(r[key]) for r in runs["default"]]
    gain = statistics.median(default) - statistics.median(tuned)
    apart = max(tuned) < min(default) or max(default) < min(tuned)
    spread = "beyond" if apart else "within"
    if min(len(tuned), len(default)) < 3:
        spread = "too few runs to tell against"
    return f"{key}: tuned - default = {-gain:+.3g} (medians); {spread} run-to-run spread"


async def _main(args: argparse.Namespace) -> None:
    fake, base_url = start_fake_realistic(args.latency_ms)
    runs: dict[str, list[dict[str, Any]]] = {arm: [] for arm in ARMS}
    try:
        for round_ in range(args.rounds):
            order = list(ARMS) if round_ % 2 == 0 else list(ARMS)[::-1]
            for arm in order:
                result = await run_realistic(args.n, base_url, args.latency_ms, launcher=ARMS[arm])
                runs[arm].append(result)
                print(
                    f"round {round_ + 1} {arm}: total {result['total_s']} s, "
                    f"{result['cpu_ms_per_msg']} ms CPU/msg",
                    flush=True,
                )
    finally:
        fake.terminate()
        fake.wait()
    print(
        f"\nrealistic case, {args.n} senders, {args.latency_ms} ms per LLM call, "
        f"{args.rounds} runs per arm (warm burst)"
    )
    print("| arm | figure | median | range | runs |")
    print("|---|---|---:|---|---|")
    for key in ("total_s", "cpu_ms_per_msg", "peak_rss_mb"):
        for arm in ARMS:
            print(_row(arm, runs[arm], key))
    for key in ("total_s", "cpu_ms_per_msg"):
        print(_verdict(runs, key))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--latency-ms", type=int, default=200)
    asyncio.run(_main(parser.parse_args()))


if __name__ == "__main__":
    main()
