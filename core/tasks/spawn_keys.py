"""Spawn keys: what makes a spawn idempotent when a crashed turn is run again.

A turn that is rerun repeats its tool calls; a spawn whose key is already recorded
returns that record instead of starting another. The key is the calling message, a
digest of the call, and how many identical calls that message made before (two equal
spawns in one turn are two tasks). The counts live in memory: a rerun after a crash
counts from zero again, so its calls get the keys the first run recorded.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence

__all__ = ["SpawnKeys"]

_KEPT = 10_000
"""Counts remembered: a rerun after a crash starts from a fresh process, so only recent
ones matter."""


class SpawnKeys:
    """Counts identical calls per message (the oldest counts are dropped past ``kept``)."""

    def __init__(self, kept: int = _KEPT) -> None:
        self._counts: dict[str, int] = {}
        self._kept = kept

    def key(self, prefix: str, call: Sequence[object]) -> str:
        """``<prefix>:<digest of call>:<n>``, ``n`` counting from 0 per prefix and call.

        ``prefix`` names the calling message (and may say what kind of spawn it is).
        """
        digest = hashlib.sha256(json.dumps(list(call)).encode()).hexdigest()[:24]
        base = f"{prefix}:{digest}"
        count = self._counts.get(base, 0)
        self._counts[base] = count + 1
        while len(self._counts) > self._kept:  # oldest first: dicts keep order
            del self._counts[next(iter(self._counts))]
        return f"{base}:{count}"
