"""Replies as Teams shows them: Markdown (Teams renders it), long replies split, errors short."""

from __future__ import annotations

from channels.reply_text import first_line, split_text

__all__ = ["MAX_CHARS", "error_line", "split"]

MAX_CHARS = 12_000
"""Characters per message: well under Teams' ~28 KB limit for a whole activity."""


def split(text: str, limit: int = MAX_CHARS) -> list[str]:
    """``text`` as messages of at most ``limit`` characters (`split_text`)."""
    return split_text(text, limit)


def error_line(text: str, limit: int = 300) -> str:
    """An error as one short line, never a stack trace."""
    return f"⚠️ {first_line(text, limit)}"
