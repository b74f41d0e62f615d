"""Splitting a long reply into messages a chat platform accepts, and errors as one line
(pure; shared by the Slack and Teams channels, each with its own size limit)."""

from __future__ import annotations

__all__ = ["first_line", "split_text"]


def _blocks(text: str) -> list[str]:
    """Paragraphs and whole code blocks (a code block is never split between blocks)."""
    blocks: list[str] = []
    current: list[str] = []
    in_code = False
    for line in text.split("\n"):
        if line.strip().startswith("```"):
            if not in_code and current:
                blocks.append("\n".join(current))
                current = []
            current.append(line)
            in_code = not in_code
            if not in_code:
                blocks.append("\n".join(current))
                current = []
            continue
        if not in_code and not line.strip():
            if current:
                blocks.append("\n".join(current))
                current = []
            continue
        current.append(line)
    if current:
        blocks.append("\n".join(current))
    return blocks


def _cut(block: str, limit: int) -> list[str]:
    """A block longer than ``limit``: at line ends, else hard; code stays fenced per piece."""
    code = block.startswith("```")
    body = block[3:-3].strip("\n") if code else block
    budget = limit - 8 if code else limit
    pieces: list[str] = []
    current = ""
    for line in body.split("\n"):
        while len(line) > budget:
            if current:
                pieces.append(current)
                current = ""
            pieces.append(line[:budget])
            line = line[budget:]
        candidate = f"{current}\n{line}" if current else line
        if len(candidate) > budget:
            pieces.append(current)
            current = line
        else:
            current = candidate
    if current:
        pieces.append(current)
    return [f"```\n{p}\n```" for p in pieces] if code else pieces


def split_text(text: str, limit: int) -> list[str]:
    """Split ``text`` into messages of at most ``limit`` characters.

    Cuts between paragraphs and code blocks; a block too long for one message is cut at
    line ends (a cut code block is re-fenced in each piece). Never returns an empty list.
    """
    if len(text) <= limit:
        return [text]
    parts: list[str] = []
    current = ""
    for block in _blocks(text):
        pieces = [block] if len(block) <= limit else _cut(block, limit)
        for piece in pieces:
            candidate = f"{current}\n\n{piece}" if current else piece
            if len(candidate) <= limit:
                current = candidate
            else:
                if current:
                    parts.append(current)
                current = piece
    if current:
        parts.append(current)
    return parts or [text[:limit]]


def first_line(text: str, limit: int = 300) -> str:
    """An error as one short line (its first line, capped), never a stack trace."""
    first = next((line.strip() for line in text.splitlines() if line.strip()), "Something failed.")
    if len(first) > limit:
        first = first[: limit - 1] + "…"
    return first
