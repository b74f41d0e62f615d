"""How an approval's command is shown to the user: whole and verbatim, never cut.

A short one-line command is inline code; any other is a fenced code block with every
character of it (channels split long replies into several messages, never truncate).
A command with invisible or control characters (a right-to-left override, a carriage
return, a zero-width space) or a Markdown fence in it is shown escaped instead, so that
nothing in it can hide or reorder what runs. Confirmations of a huge command give its
length and digest; the request notice showed it in full.
"""

from __future__ import annotations

import json
import unicodedata

from .records import ApprovalInfo

__all__ = [
    "HUGE",
    "INLINE_MAX",
    "command_block",
    "command_reference",
    "command_short",
    "digest_label",
    "escaped_if_hidden",
    "has_hidden",
]

INLINE_MAX = 200
"""Longest command shown as inline code (one line, no backtick)."""
HUGE = 3000
"""Longer commands are named by length and digest in confirmations."""
_VISIBLE_CONTROLS = {"\n", "\t"}


def has_hidden(text: str) -> bool:
    """Whether ``text`` has characters that render as nothing or move others (C0/C1
    controls, format, bidi...): show it escaped then."""
    for char in text:
        if char in _VISIBLE_CONTROLS:
            continue
        category = unicodedata.category(char)
        if category[0] == "C" or category in ("Zl", "Zp") or (category == "Zs" and char != " "):
            return True
    return False


def escaped_if_hidden(command: str) -> str:
    """``command`` as a JSON string when invisible or control characters in it could hide
    or reorder what runs (`has_hidden`); else as it is."""
    return json.dumps(command, ensure_ascii=True) if has_hidden(command) else command


def digest_label(info: ApprovalInfo) -> str:
    """``sha256 1a2b3c4d5e6f7a8b`` (the start of the approval's digest)."""
    return f"sha256 {(info.command_sha256 or 'none')[:16]}"


def _inline(command: str) -> bool:
    return len(command) <= INLINE_MAX and "\n" not in command and "`" not in command


def command_block(info: ApprovalInfo) -> str:
    """The whole command as the user reads it: inline code, a fenced block, or escaped.

    Inline commands come back as ``` `cmd` ```; others start with a newline, so they
    can follow a sentence.
    """
    command = info.command
    if has_hidden(command) or "```" in command:
        escaped = json.dumps(command, ensure_ascii=True)
        return (
            f"\n(shown escaped, as a JSON string: it contains invisible characters or a "
            f"code fence; {len(command)} characters, {digest_label(info)})\n```\n{escaped}\n```"
        )
    if _inline(command):
        return f"`{command}`"
    return f"\n({len(command)} characters, {digest_label(info)})\n```\n{command}\n```"


def command_reference(info: ApprovalInfo) -> str:
    """The command in a confirmation: whole unless huge (then its length and digest)."""
    if len(info.command) > HUGE:
        return f"the command of {len(info.command)} characters ({digest_label(info)})"
    return command_block(info)


def command_short(info: ApprovalInfo) -> str:
    """The command in a one-line error: inline when short, else its length and digest."""
    if _inline(info.command) and not has_hidden(info.command):
        return f"`{info.command}`"
    return f"the command of {len(info.command)} characters ({digest_label(info)})"
