"""One ``SKILL.md``: its front matter checked against the Agent Skills specification.

Lenient as the spec's guide for clients advises: a skill loads with a warning when its
``name`` breaks the spec's rules or does not match its folder, or when a field is too
long; it does not load without a ``description`` or with front matter that cannot be
read. Unknown keys (Claude Code's ``argument-hint``, ``model``, ``hooks``...) are ignored.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from core.front_matter import FrontMatter, FrontMatterError, read_front_matter
from core.tool_aliases import fixed_alias

__all__ = ["ParsedSkill", "SkillFileError", "map_allowed_tools", "parse_skill_text"]

_SPEC_NAME = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
_SPEC_NAME_MAX = 64
_USABLE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
"""What can serve as the ``skill`` tool's argument (and a folder's name)."""
_DESCRIPTION_MAX = 1024
_COMPATIBILITY_MAX = 500
_TOKEN = re.compile(r"[^\s,()]+(?:\([^)]*\))?")
"""One ``allowed-tools`` entry: a name, with Claude's ``(argument pattern)`` if any."""


class SkillFileError(ValueError):
    """The file is not a usable skill; ``line`` is the 1-based line, when known."""

    def __init__(self, message: str, line: int | None = None) -> None:
        super().__init__(message)
        self.line = line


@dataclass(frozen=True, slots=True, kw_only=True)
class ParsedSkill:
    """The fields of one ``SKILL.md``, and the warnings about it as ``(line, message)``."""

    name: str
    description: str
    body: str
    license: str | None
    compatibility: str | None
    metadata: dict[str, str]
    allowed_tools: tuple[str, ...] | None
    allowed_tools_raw: tuple[str, ...]
    model_invocable: bool
    warnings: tuple[tuple[int | None, str], ...]


def parse_skill_text(text: str, *, folder_name: str) -> ParsedSkill:
    """Parse a ``SKILL.md`` found in the folder ``folder_name``.

    Raises:
        SkillFileError: the skill cannot be loaded (no front matter, unreadable YAML, no
            description, a name that cannot be used).
    """
    try:
        front = read_front_matter(text, lenient="quote")
    except FrontMatterError as exc:
        raise SkillFileError(str(exc), exc.line) from None
    warnings: list[tuple[int | None, str]] = []
    if front.yaml_error is not None:
        problem, line = front.yaml_error
        note = f"bad YAML front matter: {problem}; read leniently with the value quoted"
        warnings.append((line, f"{note} (quote it)"))
    name = _name(front, folder_name, warnings)
    description = _text(front, "description")
    if not description:
        raise SkillFileError("'description' is required", front.line("description"))
    description = " ".join(description.split())
    if len(description) > _DESCRIPTION_MAX:
        warnings.append(
            (front.line("description"), f"description is over {_DESCRIPTION_MAX} characters")
        )
    compatibility = _text(front, "compatibility")
    if compatibility is not None and len(compatibility) > _COMPATIBILITY_MAX:
        warnings.append(
            (front.line("compatibility"), f"compatibility is over {_COMPATIBILITY_MAX} characters")
        )
    raw_tools = _allowed_tools(front)
    return ParsedSkill(
        name=name,
        description=description,
        body=front.body.strip(),
        license=_text(front, "license"),
        compatibility=compatibility,
        metadata=_metadata(front, warnings),
        allowed_tools=None if raw_tools is None else map_allowed_tools(raw_tools),
        allowed_tools_raw=raw_tools or (),
        model_invocable=front.data.get("disable-model-invocation") is not True,
        warnings=tuple(warnings),
    )


def map_allowed_tools(names: Iterable[str]) -> tuple[str, ...]:
    """``allowed-tools`` entries -> familiar tool names or patterns.

    Claude Code and Copilot names go through the agent files' table (`core.tool_aliases`:
    ``Read`` -> ``read_file``, ``list_dir``, ``resolve_path``; ``Bash(git:*)`` -> ``exec``,
    its argument pattern dropped); ``mcp__server`` means every tool of that server and
    ``server/tool`` is ``mcp__server__tool``; anything else (familiar's own names) is kept
    as it is. A name that matches no tool (``WebFetch``) allows nothing.
    """
    mapped: list[str] = []
    for raw in names:
        base = raw.split("(", 1)[0].strip()
        alias = fixed_alias(base)
        if alias:
            found: tuple[str, ...] = alias
        elif base.startswith("mcp__") and "__" not in base.removeprefix("mcp__"):
            found = (f"{base}__*",)
        elif "/" in base:
            server, _, tool = base.partition("/")
            found = (f"mcp__{server}__{tool or '*'}",)
        else:
            found = (base,) if base else ()
        mapped.extend(n for n in found if n not in mapped)
    return tuple(mapped)


def _name(front: FrontMatter, folder_name: str, warnings: list[tuple[int | None, str]]) -> str:
    name = _text(front, "name")
    line = front.line("name")
    if name is None:
        if not _USABLE_NAME.fullmatch(folder_name):
            raise SkillFileError(
                f"no 'name', and the folder name {folder_name!r} is not a usable skill name", 2
            )
        warnings.append((2, f"no 'name': loaded under its folder's name {folder_name!r}"))
        return folder_name
    if not _USABLE_NAME.fullmatch(name):
        raise SkillFileError(
            f"name {name!r} is not usable: 1-128 letters, digits or ._- (starting with a "
            "letter or digit); the spec asks for lowercase letters, digits and hyphens",
            line,
        )
    if not _SPEC_NAME.fullmatch(name) or len(name) > _SPEC_NAME_MAX:
        warnings.append(
            (
                line,
                f"name {name!r} breaks the spec: 1-{_SPEC_NAME_MAX} lowercase letters, digits "
                "and single hyphens, not at either end",
            )
        )
    if name != folder_name:
        warnings.append(
            (line, f"name {name!r} does not match its folder {folder_name!r} (the spec asks)")
        )
    return name


def _text(front: FrontMatter, key: str) -> str | None:
    value = front.data.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise SkillFileError(f"'{key}' must be text", front.line(key))
    return str(value).strip() or None


def _metadata(front: FrontMatter, warnings: list[tuple[int | None, str]]) -> dict[str, str]:
    value = front.data.get("metadata")
    if value is None:
        return {}
    if not isinstance(value, dict):
        warnings.append((front.line("metadata"), "metadata must be a mapping; ignored"))
        return {}
    return {str(k): str(v) for k, v in value.items()}


def _allowed_tools(front: FrontMatter) -> tuple[str, ...] | None:
    value: Any = front.data.get("allowed-tools")
    if value is None:
        return None
    if isinstance(value, str):
        found = tuple(_TOKEN.findall(value))
    elif isinstance(value, list) and all(isinstance(v, str) for v in value):
        found = tuple(t for v in value for t in _TOKEN.findall(v))
    else:
        # Not ignored: the field narrows what may run, so a skill without it is wider.
        raise SkillFileError(
            "allowed-tools must be a space-separated string or a list of tool names",
            front.line("allowed-tools"),
        )
    return found or None
