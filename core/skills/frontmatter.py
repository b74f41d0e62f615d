"""YAML front matter of a Markdown file: the mapping, the body and the line of each key.

Lenient where the tools that own the format are: files written for other clients often
carry an unquoted value with ``: `` in it (``description: Use when: ...``), which YAML
refuses; such values are quoted and the YAML read again, and the caller is told so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

__all__ = ["FrontMatter", "FrontMatterError", "read_front_matter"]

_FIRST_LINE = 2
"""The file line of the front matter's first line (after the opening ``---``)."""
_PLAIN_VALUE = re.compile(r"^([A-Za-z0-9_][A-Za-z0-9_.-]*):[ \t]+(\S.*?)[ \t]*$")
_NOT_PLAIN = tuple("\"'|>[{&*!#%@`")


class FrontMatterError(ValueError):
    """No usable front matter; ``line`` is the 1-based line of the file, when known."""

    def __init__(self, message: str, line: int | None = None) -> None:
        super().__init__(message)
        self.line = line


@dataclass(frozen=True, slots=True)
class FrontMatter:
    """A file's front matter.

    Attributes:
        data: the YAML mapping.
        body: the text after the closing ``---``.
        lines: the file line of each top-level key.
        lenient: when the YAML was read only after quoting values: the original error
            (with its line) for a warning.
    """

    data: dict[str, Any]
    body: str
    lines: dict[str, int] = field(default_factory=dict)
    lenient: tuple[str, int | None] | None = None

    def line(self, key: str) -> int:
        """The line of ``key``, else the first line of the front matter."""
        return self.lines.get(key, _FIRST_LINE)


def read_front_matter(text: str) -> FrontMatter:
    """Split ``text`` into its YAML front matter (parsed) and body.

    Raises:
        FrontMatterError: no front matter, not closed, YAML that cannot be read even
            leniently, or not a mapping.
    """
    front, body = _split(text)
    try:
        data = _load(front)
        lenient = None
    except FrontMatterError as exc:
        quoted = _quote_plain_values(front)
        if quoted == front:
            raise
        try:
            data = _load(quoted)
        except FrontMatterError:
            raise exc from None
        lenient = (str(exc), exc.line)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise FrontMatterError("the front matter must be a mapping of fields", _FIRST_LINE)
    return FrontMatter({str(k): v for k, v in data.items()}, body, _key_lines(front), lenient)


def _split(text: str) -> tuple[str, str]:
    lines = text.lstrip("\ufeff").splitlines()
    if not lines or lines[0].strip() != "---":
        raise FrontMatterError("no YAML front matter: the file must start with a --- line", 1)
    for index in range(1, len(lines)):
        if lines[index].strip() in ("---", "..."):
            return "\n".join(lines[1:index]), "\n".join(lines[index + 1 :])
    raise FrontMatterError("the front matter is not closed by a --- line", len(lines))


def _load(front: str) -> Any:
    import yaml  # only a home with skills pays for the YAML parser

    if not front.strip():
        return {}
    try:
        # The C loader when PyYAML has it: a catalog of hundreds of skills loads 10x faster.
        return yaml.load(front, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = None if mark is None else mark.line + _FIRST_LINE
        raise FrontMatterError(f"bad YAML front matter: {exc.problem or exc}", line) from None
    except yaml.YAMLError as exc:
        raise FrontMatterError(f"bad YAML front matter: {exc}", _FIRST_LINE) from None


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


def _key_lines(front: str) -> dict[str, int]:
    found: dict[str, int] = {}
    for index, line in enumerate(front.splitlines()):
        key, colon, _ = line.partition(":")
        if colon and key and not key[0].isspace() and not key.startswith("#"):
            found.setdefault(key.strip().strip("\"'"), index + _FIRST_LINE)
    return found
