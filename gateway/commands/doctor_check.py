"""One ``familiar doctor`` check: what every ``doctor_*`` module returns and doctor prints."""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["Check"]


class Check(NamedTuple):
    name: str
    ok: bool
    reason: str
    warn: bool = False
    """Passed, but loudly: printed with ``!``; does not change the exit code."""
