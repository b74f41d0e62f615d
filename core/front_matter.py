"""YAML front matter of a Markdown file (skills and agent files): the fields, the body and
the line of each key, lenient where the tools that own these formats are.

Files written for Claude Code or Copilot often carry what strict YAML refuses, such as
an unquoted ``description: Use when: ...`` (``: `` inside a plain scalar). Two ways to
read on, chosen by the caller:

- ``"quote"``: such values are single-quoted and the YAML read again (skills);
- ``"lines"``: the simple fields are read as ``key: value`` lines, their indented
  continuations and ``- item`` lists (agent files); what cannot be read that way is
  reported in ``notes``, never guessed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["FrontMatter", "FrontMatterError", "Leniency", "read_front_matter"]

Leniency = Literal["quote", "lines"]

_FIRST_LINE = 2
"""The file line of the front matter's first line (after the opening ``---``)."""
_PLAIN_VALUE = re.compile(r"^([A-Za-z0-9_][A-Za-z0-9_.-]*):[ \t]+(\S.*?)[ \t]*$")
_NOT_PLAIN = tuple("\"'|>[{&*!#%@`")
_KEY = re.compile(r"([A-Za-z_][A-Za-z0-9_.-]*)[ \t]*:(?:[ \t]+(.*)|[ \t]*)$")
_ITEM = re.compile(r"-(?:[ \t]+(.*)|[ \t]*)$")


class FrontMatterError(ValueError):
    """No usable front matter; ``line`` is the 1-based line of the file, when known."""

    def __init__(self, message: str, line: int | None = None) -> None:
        super().__init__(message)
        self.line = line


@dataclass(frozen=True, slots=True)
class FrontMatter:
    """A file's front matter.

    Attributes:
        data: field name -> value (YAML's types, or text and lists of text when read
            as lines).
        body: the text after the closing ``---``.
        lines: the file line of each top-level key.
        yaml_error: why strict YAML refused the block, and the file's line, when it did
            (the fields were then read leniently).
        notes: what was not strict YAML and what could not be read (``"lines"`` only).
    """

    data: dict[str, Any]
    body: str
    lines: dict[str, int] = field(default_factory=dict)
    yaml_error: tuple[str, int | None] | None = None
    notes: tuple[str, ...] = ()

    def line(self, key: str) -> int:
        """The line of ``key``, else the first line of the front matter."""
        return self.lines.get(key, _FIRST_LINE)


def read_front_matter(text: str, *, lenient: Leniency) -> FrontMatter:
    """Split ``text`` into its YAML front matter (parsed) and body.

    Raises:
        FrontMatterError: no front matter, not closed, YAML that cannot be read even
            leniently, or not a mapping.
    """
    front, body = _split(text)
    lines = _key_lines(front)
    try:
        data = _load(front)
    except _YamlRefused as refused:
        if lenient == "lines":
            found, notes = _read_lines(front, refused.problem, refused.line)
            return FrontMatter(found, body, lines, (refused.problem, refused.line), notes)
        quoted = _quote_plain_values(front)
        try:
            data = None if quoted == front else _load(quoted)
        except _YamlRefused:
            data = None
        if data is None:
            raise refused.error() from None
        return FrontMatter(_mapping(data), body, lines, (refused.problem, refused.line))
    return FrontMatter(_mapping(data), body, lines)


class _YamlRefused(Exception):
    def __init__(self, problem: str, line: int | None) -> None:
        super().__init__(problem)
        self.problem = problem
        self.line = line

    def error(self) -> FrontMatterError:
        return FrontMatterError(f"bad YAML front matter: {self.problem}", self.line)


def _split(text: str) -> tuple[str, str]:
    lines = text.lstrip("\ufeff").splitlines()
    if not lines or lines[0].strip() != "---":
        raise FrontMatterError("no YAML front matter: the file must start with a --- line", 1)
    for index in range(1, len(lines)):
        if lines[index].strip() in ("---", "..."):
            return "\n".join(lines[1:index]), "\n".join(lines[index + 1 :])
    raise FrontMatterError("the front matter is not closed by a --- line", len(lines))


def _load(front: str) -> Any:
    import yaml  # only a home with skills or agent files pays for the YAML parser

    if not front.strip():
        return {}
    try:
        # The C loader when PyYAML has it: a catalog of hundreds of skills loads 10x faster.
        return yaml.load(front, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        last = len(front.splitlines()) + _FIRST_LINE - 1
        # The C loader marks an unclosed value at the end of the stream: the closing ---.
        line = None if mark is None else min(mark.line + _FIRST_LINE, last)
        raise _YamlRefused(str(exc.problem or str(exc).splitlines()[0]), line) from None
    except yaml.YAMLError as exc:
        raise _YamlRefused(str(exc), _FIRST_LINE) from None


def _mapping(data: Any) -> dict[str, Any]:
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise FrontMatterError("the front matter must be a mapping of fields", _FIRST_LINE)
    return {str(k): v for k, v in data.items()}


def _key_lines(front: str) -> dict[str, int]:
    found: dict[str, int] = {}
    for index, line in enumerate(front.splitlines()):
        key, colon, _ = line.partition(":")
        if colon and key and not key[0].isspace() and not key.startswith("#"):
            found.setdefault(key.strip().strip("\"'"), index + _FIRST_LINE)
    return found


def _quote_plain_values(front: str) -> str:
    """Top-level ``key: value`` lines whose plain value holds ``: `` or `` #``, with the
    value single-quoted (what Claude Code and Copilot accept unquoted)."""
    out = []
    for line in front.splitlines():
        match = _PLAIN_VALUE.match(line)
        value = match[2] if match else ""
        if match and not value.startswith(_NOT_PLAIN) and (": " in value or " #" in value):
            escaped = value.replace("'", "''")
            line = f"{match[1]}: '{escaped}'"
        out.append(line)
    return "\n".join(out)


def _read_lines(
    front: str, problem: str, line: int | None
) -> tuple[dict[str, Any], tuple[str, ...]]:
    """Top-level ``key: value`` lines, their indented continuations and ``- item`` lists."""
    data: dict[str, Any] = {}
    unread: list[str] = []
    key: str | None = None
    for number, text in enumerate(front.splitlines(), start=_FIRST_LINE):
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
    return data, tuple(notes)


def _scalar(value: str) -> str | list[str]:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        inner = value[1:-1]
        return inner.replace("''", "'") if value[0] == "'" else inner.replace('\\"', '"')
    if value.startswith("[") and value.endswith("]"):
        items = [v.strip() for v in value[1:-1].split(",")]
        return [str(_scalar(v)) for v in items if v]
    return value.split(" #", 1)[0].rstrip()
