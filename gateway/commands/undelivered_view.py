"""Replies no channel can deliver, as ``familiar status`` rows and ``doctor`` checks.

Both read the gateway's status (``undelivered``: per channel, ``count``, ``oldest_at``,
``reason``, ``expires_at``; see `gateway.undelivered`).
"""

from __future__ import annotations

import time
from typing import Any

from gateway.commands.common import duration
from gateway.commands.doctor_check import Check

__all__ = ["undelivered_checks", "undelivered_rows"]

_CHECK = "replies deliverable"


def _describe(item: dict[str, Any], now: float) -> str:
    count = item.get("count", 0)
    oldest, expires = item.get("oldest_at"), item.get("expires_at")
    age = duration(now - oldest) if isinstance(oldest, int | float) else "?"
    left = duration(max(0.0, expires - now)) if isinstance(expires, int | float) else "?"
    return (
        f"{count} repl{'y' if count == 1 else 'ies'} for {item.get('channel')} waiting, "
        f"oldest {age} ago: {item.get('reason')}; given up (delivery.failed) in {left}"
    )


def _items(status: dict[str, Any]) -> list[dict[str, Any]]:
    return [i for i in status.get("undelivered") or [] if isinstance(i, dict)]


def undelivered_rows(status: dict[str, Any], now: float | None = None) -> list[tuple[str, str]]:
    """``familiar status`` rows (label, plain text): one per channel with replies that
    nothing delivers, or none."""
    moment = time.time() if now is None else now
    return [("undelivered", _describe(item, moment)) for item in _items(status)]


def undelivered_checks(status: dict[str, Any], now: float | None = None) -> list[Check]:
    """``doctor``'s check: failed while replies wait that no channel delivers."""
    if "undelivered" not in status:
        return []  # a gateway too old to say
    moment = time.time() if now is None else now
    items = _items(status)
    if not items:
        return [Check(_CHECK, True, "no reply waits for a channel that is not enabled")]
    return [Check(_CHECK, False, "; ".join(_describe(i, moment) for i in items))]
