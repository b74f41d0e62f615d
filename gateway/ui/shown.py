"""How the Approvals and Schedules pages show times."""

from __future__ import annotations

from datetime import UTC, datetime

__all__ = ["clock_text"]


def clock_text(moment: datetime) -> str:
    """``2026-11-27 11:05 UTC`` (seconds dropped)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")
