"""Plain readers and writers of schedule values (durations, time zones, local times)."""

from __future__ import annotations

import re
from datetime import datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

__all__ = [
    "MAX_INTERVAL",
    "MIN_INTERVAL",
    "format_duration",
    "format_local",
    "parse_duration",
    "zone_name",
]

MIN_INTERVAL = 10
"""Shortest accepted /every interval or /after delay, in seconds (inclusive)."""
MAX_INTERVAL = 86_400
"""Longest accepted /every interval or /after delay, in seconds (inclusive)."""

_UNITS = (("d", 86_400), ("h", 3_600), ("m", 60), ("s", 1))
# Nine digits is far beyond MAX_INTERVAL and keeps int() away from huge inputs.
_DURATION_RE = re.compile(r"(?:(\d{1,9})d)?(?:(\d{1,9})h)?(?:(\d{1,9})m)?(?:(\d{1,9})s)?", re.I)
_TZ_RE = re.compile(r"[A-Za-z0-9_+\-/]{1,64}")


def parse_duration(text: str) -> int:
    """Read an interval like ``30s``, ``5m``, ``2h``, ``1h30m``, ``1d`` or ``1d2h``.

    Units d, h, m and s may each appear once, largest first; case is ignored. Bare
    numbers are refused because ``5`` could mean seconds or minutes.

    Args:
        text: the interval as typed.

    Returns:
        The interval in seconds (bounds are checked by the callers, not here).

    Raises:
        ValueError: the text is not an interval (the message is fit to show users).
    """
    cleaned = text.strip()
    match = _DURATION_RE.fullmatch(cleaned)
    if not cleaned or match is None:
        hint = f" (add a unit, e.g. {cleaned}m)" if cleaned.isdigit() else ""
        raise ValueError(f"can't read the interval '{cleaned}'{hint} — try 30s, 5m, 2h or 1d")
    return sum(
        int(value) * size for value, (_, size) in zip(match.groups(), _UNITS, strict=True) if value
    )


def format_duration(seconds: int) -> str:
    """Render seconds canonically, largest units first: 5400 -> ``1h30m``, 0 -> ``0s``.

    Args:
        seconds: a non-negative number of seconds.

    Returns:
        The text :func:`parse_duration` reads back to the same number.

    Raises:
        ValueError: ``seconds`` is negative.
    """
    if seconds < 0:
        raise ValueError(f"negative duration: {seconds}")
    parts = []
    for unit, size in _UNITS:
        count, seconds = divmod(seconds, size)
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts) or "0s"


def zone_name(name: str) -> str:
    """Check an IANA time zone name and return it stripped.

    Raises:
        ValueError: no such zone (the message is fit to show users).
    """
    cleaned = name.strip()
    if _TZ_RE.fullmatch(cleaned):
        try:
            ZoneInfo(cleaned)
        except (ZoneInfoNotFoundError, ValueError, OSError):
            pass
        else:
            return cleaned
    raise ValueError(
        f"unknown timezone '{cleaned}' — use an IANA name"
        " like Europe/Berlin, America/New_York or UTC"
    )


def format_local(moment: datetime, zone: str) -> str:
    """``2026-11-22 10:05 Europe/Berlin`` (seconds only when there are some)."""
    local = moment.astimezone(ZoneInfo(zone))
    shape = "%Y-%m-%d %H:%M:%S" if local.second else "%Y-%m-%d %H:%M"
    return f"{local.strftime(shape)} {zone}"
