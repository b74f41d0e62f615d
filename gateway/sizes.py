"""Byte counts for people (stdlib only: the CLI's start-up path uses it)."""

from __future__ import annotations

__all__ = ["size_text"]


def size_text(size: int) -> str:
    """``size`` bytes for people: ``1 MiB``, ``512 KiB`` or ``100 bytes``."""
    for unit, scale in (("MiB", 1024 * 1024), ("KiB", 1024)):
        if size >= scale and size % scale == 0:
            return f"{size // scale} {unit}"
    return f"{size} bytes"
