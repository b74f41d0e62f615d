"""Custom agent files: Markdown with YAML front matter, in Copilot, VS Code and Claude shapes.

One parser for all of them (see conventions §1). The id is ``name`` when that is a valid
id, else the file name without ``.agent.md``/``.chatmode.md``/``.md`` (Copilot's rule;
the ``name`` then stays as the display name). ``description`` is required; ``tools`` (a
YAML list or a comma separated string) is mapped to our tools (`core.tasks.agent_tools`),
``model`` through ``[models]`` (`core.providers.aliases`); ``memory_share_mode`` is
ours. The body is the agent's instructions. Unknown keys are ignored. Front matter that
strict YAML refuses is read line by line where the fields are simple
(`core.front_matter`).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.front_matter import FrontMatterError, read_front_matter
from core.providers.aliases import ModelAliases
from core.tasks.agent_tools import ToolVocabulary, map_tools
from core.tasks.spec import AgentSpec
from core.tools.subagents_config import MEMORY_SHARE_MODES

__all__ = [
    "AgentFileProblem",
    "AgentFiles",
    "AgentSource",
    "Shadowed",
    "file_id",
    "load_agent_files",
    "parse_agent",
]

log = logging.getLogger(__name__)

_MAX_FILE_BYTES = 256 * 1024
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
_NOT_ID = re.compile(r"[^A-Za-z0-9_.-]+")
_SUFFIXES = (".agent.md", ".chatmode.md", ".md")
_SKIPPED = frozenset({"readme.md"})
"""Files in agent folders that are about the agents, not agents."""


@dataclass(frozen=True, slots=True)
class AgentSource:
    """A directory of agent files and the pattern their names match."""

    directory: Path
    pattern: str

    def files(self) -> list[Path]:
        try:
            found = self.directory.glob(self.pattern)
            return sorted(p for p in found if p.name.lower() not in _SKIPPED and p.is_file())
        except OSError:
            return []


@dataclass(frozen=True, slots=True)
class AgentFileProblem:
    """A file that is not a usable agent: where and why."""

    path: str
    line: int | None
    message: str

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line else self.path
        return f"{where}: {self.message}"


@dataclass(frozen=True, slots=True)
class Shadowed:
    """An agent file not used because an earlier source has an agent of the same id."""

    path: str
    name: str
    by: str


@dataclass(frozen=True, slots=True)
class AgentFiles:
    """What reading the agent sources found: agents, files that failed, shadowed files."""

    agents: list[AgentSpec] = field(default_factory=list)
    problems: list[AgentFileProblem] = field(default_factory=list)
    shadowed: list[Shadowed] = field(default_factory=list)


class _Bad(ValueError):
    def __init__(self, message: str, line: int | None = None) -> None:
        super().__init__(message)
        self.line = line


def load_agent_files(
    sources: Sequence[AgentSource],
    *,
    vocabulary: ToolVocabulary | None = None,
    models: ModelAliases | None = None,
) -> AgentFiles:
    """Parse every file of ``sources`` (in order); bad ones become problems."""
    found = AgentFiles()
    seen: dict[str, str] = {}
    for source in sources:
        for path in source.files():
            try:
                raw = path.read_bytes()[: _MAX_FILE_BYTES + 1]
                if len(raw) > _MAX_FILE_BYTES:
                    raise _Bad(f"larger than {_MAX_FILE_BYTES} bytes")
                spec = parse_agent(
                    raw.decode("utf-8"), path=path, vocabulary=vocabulary, models=models
                )
            except _Bad as exc:
                found.problems.append(AgentFileProblem(str(path), exc.line, str(exc)))
                continue
            except (OSError, UnicodeDecodeError) as exc:
                found.problems.append(AgentFileProblem(str(path), None, f"cannot read: {exc}"))
                continue
            if spec.name in seen:
                found.shadowed.append(Shadowed(str(path), spec.name, seen[spec.name]))
                continue
            seen[spec.name] = str(path)
            found.agents.append(spec)
    return found


def file_id(path: Path) -> str:
    """The id a file gives its agent: its name without the agent suffixes, made an id."""
    name = path.name
    stem = next((name[: -len(s)] for s in _SUFFIXES if name.lower().endswith(s)), name)
    return _NOT_ID.sub("-", stem).strip("-._")[:128]


def parse_agent(
    text: str,
    *,
    path: Path,
    vocabulary: ToolVocabulary | None = None,
    models: ModelAliases | None = None,
) -> AgentSpec:
    """One agent file's text -> its AgentSpec.

    Args:
        vocabulary: our tools and MCP servers, that ``tools`` map to.
        models: the ``[models]`` table ``model`` is resolved through.

    Raises:
        ValueError: no or unreadable front matter, or a field of the wrong kind (its
            ``line`` attribute is the 1-based line in the file, when known).
    """
    try:
        read = read_front_matter(text, lenient="lines")
    except FrontMatterError as exc:
        raise _Bad(str(exc), exc.line) from None
    data, notes, lines, body = read.data, list(read.notes), read.lines, read.body
    written = _text(data, "name", lines)
    name, display = _identity(written, path, lines)
    description = _text(data, "description", lines)
    if not description and read.yaml_error is not None:
        problem, line = read.yaml_error
        raise _Bad(f"bad YAML front matter: {problem} (no readable 'description')", line)
    if not description:
        raise _Bad("'description' is required", lines.get("description", 2))
    mode = _text(data, "memory_share_mode", lines) or _text(data, "memory-share-mode", lines)
    if mode is not None and mode not in MEMORY_SHARE_MODES:
        raise _Bad(
            f"memory_share_mode {mode!r} is not one of {', '.join(MEMORY_SHARE_MODES)}",
            lines.get("memory_share_mode", lines.get("memory-share-mode")),
        )
    requested = _model(data.get("model"), lines)
    choice = (models or ModelAliases()).resolve(requested)
    if choice.warning:
        notes.append(choice.warning)
    names = _tool_list(data.get("tools"), lines)
    mapped = map_tools(names, vocabulary or ToolVocabulary()) if names is not None else None
    if mapped is not None and mapped.unmapped:
        notes.append("tools that map to no tool of ours: " + ", ".join(mapped.unmapped))
    return AgentSpec(
        name=name,
        display_name=display,
        description=" ".join(description.split()),
        tools=None if mapped is None else mapped.tools,
        unmapped_tools=() if mapped is None else mapped.unmapped,
        memory_share_mode=mode,
        model=choice.model,
        requested_model=requested,
        instructions=body.strip(),
        source=str(path),
        skills=_skills(data.get("skills"), lines),
        notes=tuple(notes),
    )


def _identity(written: str | None, path: Path, lines: dict[str, int]) -> tuple[str, str | None]:
    """The id and the display name: ``name`` if it is an id, else the file's."""
    if written is not None and _NAME.fullmatch(written):
        return written, None
    stem = file_id(path)
    if not _NAME.fullmatch(stem):
        what = f"name {written!r} is" if written else "there is no name and"
        raise _Bad(
            f"{what} not an id, and neither is the file name {path.name!r}: an id is "
            "1-128 letters, digits or ._- (starting with a letter or digit)",
            lines.get("name", 2),
        )
    return stem, (written if written and written != stem else None)


def _skills(value: object, lines: dict[str, int]) -> tuple[str, ...] | None:
    """``skills``: the Agent Skills the agent sees (a list, or names split by commas)."""
    if value is None:
        return None
    names = value.replace(",", " ").split() if isinstance(value, str) else value
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise _Bad("'skills' must be a list of skill names", lines.get("skills"))
    return tuple(dict.fromkeys(n.strip() for n in names if n.strip()))


def _text(data: dict[str, Any], key: str, lines: dict[str, int]) -> str | None:
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, str | int | float) or isinstance(value, bool):
        raise _Bad(f"'{key}' must be text", lines.get(key))
    return str(value).strip() or None


def _model(value: object, lines: dict[str, int]) -> str | None:
    if isinstance(value, list):  # VS Code: a prioritised list; the first one is ours
        value = value[0] if value else None
    if value is None:
        return None
    if not isinstance(value, str):
        raise _Bad("'model' must be text (or a list of names)", lines.get("model"))
    return value.strip() or None


def _tool_list(value: object, lines: dict[str, int]) -> list[str] | None:
    if value is None:
        return None
    if isinstance(value, str):
        names: Iterable[object] = [v for v in value.split(",") if v.strip()]
    elif isinstance(value, list):
        names = value
    else:
        raise _Bad("'tools' must be a list or a comma separated string", lines.get("tools"))
    found: list[str] = []
    for raw in names:
        if not isinstance(raw, str):
            raise _Bad(f"tool {raw!r} must be text", lines.get("tools"))
        found.append(raw.strip())
    return found
