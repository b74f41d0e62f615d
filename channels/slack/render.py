"""Markdown -> Slack mrkdwn, and splitting long replies at Slack's size limits (pure)."""

from __future__ import annotations

import re

from channels.reply_text import first_line, split_text

__all__ = ["MAX_CHARS", "error_line", "split", "to_mrkdwn"]

MAX_CHARS = 3500
"""Characters per posted message: under Slack's 4,000-character advice for ``text``."""

_FENCE = re.compile(r"^\s*```")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$")
_BULLET = re.compile(r"^(\s*)[-*+]\s+(.*)$")
_HRULE = re.compile(r"^\s{0,3}([-*_])(\s*\1){2,}\s*$")
_INLINE_CODE = re.compile(r"(`+)(.+?)\1")
_LINK = re.compile(r"\[([^\]]+)\]\((https?://[^\s)]+|mailto:[^\s)]+)\)")
_AUTOLINK = re.compile(r"<(https?://[^>\s]+)>")
_BOLD = re.compile(r"(\*\*|__)(?=\S)(.+?)(?<=\S)\1")
_ITALIC = re.compile(r"(?<![*\w])\*(?=\S)([^*]+?)(?<=\S)\*(?![*\w])")
_STRIKE = re.compile(r"~~(?=\S)(.+?)(?<=\S)~~")


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _inline(text: str) -> str:
    """One line of prose: code spans kept verbatim, everything else converted."""
    out: list[str] = []
    last = 0
    for match in _INLINE_CODE.finditer(text):
        out.append(_prose(text[last : match.start()]))
        out.append(f"`{_escape(match.group(2))}`")
        last = match.end()
    out.append(_prose(text[last:]))
    return "".join(out)


def _prose(text: str) -> str:
    links: list[str] = []

    def keep(link: str) -> str:
        links.append(link)
        return f"\x00{len(links) - 1}\x00"

    text = _LINK.sub(lambda m: keep(f"<{m.group(2)}|{_escape(m.group(1))}>"), text)
    text = _AUTOLINK.sub(lambda m: keep(f"<{m.group(1)}>"), text)
    text = _escape(text)
    # Italics first (single *), so that bold's output (*x*) is not read as italics again.
    text = _ITALIC.sub(r"_\1_", text)
    text = _BOLD.sub(r"*\2*", text)
    text = _STRIKE.sub(r"~\1~", text)
    return re.sub("\x00(\\d+)\x00", lambda m: links[int(m.group(1))], text)


def to_mrkdwn(markdown: str) -> str:
    """Convert the Markdown a model writes into Slack mrkdwn.

    Bold, italics, strike-through, links, headings (as bold lines), bullet lists and
    code: fenced blocks keep their content (the language tag is dropped, Slack shows
    none), inline code is kept verbatim. ``&``, ``<`` and ``>`` are escaped.
    """
    lines: list[str] = []
    in_code = False
    for line in markdown.splitlines():
        if _FENCE.match(line):
            in_code = not in_code
            lines.append("```")
            continue
        if in_code:
            lines.append(_escape(line))
        elif heading := _HEADING.match(line):
            lines.append(f"*{_inline(heading.group(1)).strip('*')}*")
        elif _HRULE.match(line):
            lines.append("───")
        elif bullet := _BULLET.match(line):
            lines.append(f"{bullet.group(1)}• {_inline(bullet.group(2))}")
        else:
            lines.append(_inline(line))
    if in_code:
        lines.append("```")
    return "\n".join(lines)


def split(text: str, limit: int = MAX_CHARS) -> list[str]:
    """``text`` as messages of at most ``limit`` characters (`split_text`)."""
    return split_text(text, limit)


def error_line(text: str, limit: int = 300) -> str:
    """An error as one short line, never a stack trace."""
    return f":warning: {first_line(text, limit)}"
