"""Reading an agent file's front matter: YAML, else simple ``key: value`` lines.

Claude Code reads front matter that strict YAML refuses, such as an unquoted
``description: Use it when asked: 'review this'`` (``: `` inside a plain scalar), and
people copy those files. When PyYAML refuses the block, the simple fields are read line
by line instead; what cannot be read that way is reported, never guessed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

__all__ = ["FrontMatter", "FrontMatterError", "read_front_matter"]

_KEY = re.compile(r"([A-Za-z_][A-Za-z0-9_.-]*)[ \t]*:(?:[ \t]+(.*)|[ \t]*)$")
_ITEM = re.compile(r"-(?:[ \t]+(.*)|[ \t]*)$")


class FrontMatterError(ValueError):
    """Front matter that cannot be read at all (``line`` is 1-based in the file)."""

    def __init__(self, message: str, line: int | None = None) -> None:
        super().__init__(message)
        self.line = line


@dataclass(slots=True)
class FrontMatter:
    """The fields of a front matter block.

    Attributes:
        data: field name -> value (YAML's types, or text and lists of text).
        notes: what was not strict YAML and what could not be read (with lines).
        yaml_error: why strict YAML refused the block, and the file's line, when it did.
    """

    data: dict[str, Any]
    notes: list[str] = field(default_factory=list)
    yaml_error: tuple[str, int | None] | None = None


def read_front_matter(front: str) -> FrontMatter:
    """The fields of ``front`` (the lines between the ``---`` markers).

    Raises:
        FrontMatterError: neither YAML nor simple lines make it a mapping of fields.
    """
    import yaml  # only a home with agent files pays for the YAML parser

    try:
        data = yaml.safe_load(front) if front.strip() else {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        line = None if mark is None else mark.line + 2  # +1 for 1-based, +1 for the ---
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        return _lenient(front, str(problem), line)
    if not isinstance(data, dict):
        raise FrontMatterError("the front matter must be a mapping of fields", 2)
    return FrontMatter(data)


def _lenient(front: str, problem: str, line: int | None) -> FrontMatter:
    """Top-level ``key: value`` lines, their indented continuations and ``- item`` lists."""
    data: dict[str, Any] = {}
    unread: list[str] = []
    key: str | None = None
    for number, text in enumerate(front.splitlines(), start=2):
        stripped = text.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if not text[0].isspace():
            match = _KEY.match(text)
            if match is None:
                unread.append(f"line {number}")
                key = None
                continue
            key, value = match.group(1), (match.group(2) or "").strip()
            data[key] = _scalar(value) if value else None
            if value.startswith(("|", ">", "{", "&", "*", "!")) or (
                value.startswith("[") and not value.endswith("]")
            ):
                data.pop(key)
                unread.append(f"{key} (line {number})")
                key = None
            continue
        if key is None:
            continue  # under a field already reported
        item = _ITEM.match(stripped)
        current = data.get(key)
        if item is not None and (current is None or isinstance(current, list)):
            data[key] = [*(current or []), _scalar((item.group(1) or "").strip())]
        elif isinstance(current, str):
            data[key] = f"{current} {stripped}"  # a plain scalar folded over lines
        else:
            data.pop(key, None)
            unread.append(f"{key} (line {number})")
            key = None
    if not data:
        raise FrontMatterError(f"bad YAML front matter: {problem}", line)
    where = f"line {line}" if line else "somewhere"
    notes = [f"front matter is not valid YAML ({problem}, {where}); read as 'key: value' lines"]
    if unread:
        notes.append("could not read: " + ", ".join(unread))
    return FrontMatter(data, notes, (problem, line))


def _scalar(value: str) -> str | list[str]:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        inner = value[1:-1]
        return inner.replace("''", "'") if value[0] == "'" else inner.replace('\\"', '"')
    if value.startswith("[") and value.endswith("]"):
        items = [v.strip() for v in value[1:-1].split(",")]
        return [str(_scalar(v)) for v in items if v]
    return value.split(" #", 1)[0].rstrip()
