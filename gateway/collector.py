"""Garbage-collector settings for a long-running gateway process.

A started gateway holds tens of thousands of long-lived objects (configuration,
SQLAlchemy's compiled statements, channels, tools). CPython's default thresholds
(700, 10, 10) make the collector scan them again and again under load: a full
collection then costs tens of milliseconds, and about a tenth of a turn's CPU went
to the collector. Freezing what startup allocated takes it out of every later scan
(the zygote does the same for what it imported), and a larger young generation lets
most of a turn's short-lived objects die by reference counting before any scan.

It is process-wide, so only the program sets it (never `core/`), and it stays because
`tests/bench/bench_gc.py` measures what users gain from it, side by side with CPython's
defaults (docs/benchmarks.md, "Garbage-collector setting").
"""

from __future__ import annotations

import gc

__all__ = ["YOUNG_THRESHOLD", "settle_after_start"]

YOUNG_THRESHOLD = 50_000
"""Allocations between young-generation collections (CPython's default is 700): a
burst of a thousand turns keeps ~6 ms collections down to a dozen, and at most this
many unreachable containers wait for one."""


def settle_after_start() -> None:
    """Call once the process is started: what exists now lives as long as the process."""
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, old)
