"""The system prompt's ``## Skills`` section: names and descriptions within a budget."""

from __future__ import annotations

from collections.abc import Sequence

from core.skills.model import Skill

__all__ = ["SKILL_TOOL", "skills_section"]

SKILL_TOOL = "skill"
_HEADER = (
    "## Skills\n\n"
    "Skills hold instructions for particular tasks. When a task matches a skill's "
    f"description, call `{SKILL_TOOL}` with its name before you start: it returns the "
    "instructions and lists the skill's files.\n"
)
_ELLIPSIS = "…"
_NAMES_SHARE = 4


def skills_section(
    skills: Sequence[Skill], *, max_chars: int, description_max_chars: int
) -> str | None:
    """The section for ``skills`` (in catalog order), at most ``max_chars`` characters.

    Each skill is a ``- name: description`` line (the description cut at
    ``description_max_chars``). When they do not all fit, those lines take three
    quarters of the budget, the skills after them are named only while their names fit,
    and the rest are counted. None when there are no skills or the budget cannot hold
    the header.
    """
    if not skills or max_chars < len(_HEADER) + 1:
        return None
    entries = [f"\n- {s.name}: {_clip(s.description, description_max_chars)}" for s in skills]
    lines = [_HEADER]
    used = len(_HEADER)
    full = used + sum(map(len, entries)) <= max_chars
    # When not all fit, a quarter is kept for naming (or counting) the rest.
    room = max_chars if full else max_chars - max_chars // _NAMES_SHARE
    for entry in entries:
        if used + len(entry) > room:
            break
        lines.append(entry)
        used += len(entry)
    rest = skills[len(lines) - 1 :]
    if rest:
        lines.append(_overflow(rest, max_chars - used))
    text = "".join(lines)
    return text if len(text) <= max_chars else text[:max_chars]


def _overflow(rest: Sequence[Skill], room: int) -> str:
    """The skills that did not fit with their descriptions: named, then counted."""
    intro = "\n\nMore skills (call `skill` with a name, or a keyword to find others): "
    names: list[str] = []
    size = len(intro)
    for index, skill in enumerate(rest):
        left = len(rest) - index - 1
        tail = f", and {left} more" if left else ""
        piece = (", " if names else "") + skill.name
        if size + len(piece) + len(tail) > room:
            break
        names.append(skill.name)
        size += len(piece)
    left = len(rest) - len(names)
    if not names:
        counted = (
            f"\n\n{left} more skills are not listed here: call `{SKILL_TOOL}` with a keyword "
            "to find them."
        )
        return counted if len(counted) <= room else ""
    return intro + ", ".join(names) + (f", and {left} more" if left else "")


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - len(_ELLIPSIS)] + _ELLIPSIS
