"""How the Approvals and Schedules pages show times and the control API's refusals."""

from __future__ import annotations

from datetime import UTC, datetime

from gateway.control.client import ControlError

__all__ = ["clock_text", "refusal"]


def clock_text(moment: datetime) -> str:
    """``2026-11-27 11:05 UTC`` (seconds dropped)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def refusal(exc: ControlError) -> str:
    """The control API's reason, without the client's ``gateway answered N:`` prefix."""
    return str(exc).removeprefix(f"gateway answered {exc.status}: ")
