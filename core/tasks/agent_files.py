"""Custom agent files: Markdown with YAML front matter, in Copilot, VS Code and Claude shapes.

One parser for all of them (see conventions §1): ``name`` (else the file name without
``.agent.md``/``.md``), ``description`` (required), ``tools`` (a YAML list or a comma
separated string, names mapped through an alias table), ``model`` and
``memory_share_mode``; the body is the agent's instructions. Unknown keys are ignored.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.tasks.config import MEMORY_SHARE_MODES
from core.tasks.spec import AgentSpec

__all__ = ["TOOL_ALIASES", "AgentFileProblem", "AgentSource", "load_agent_files", "parse_agent"]

log = logging.getLogger(__name__)

_MAX_FILE_BYTES = 256 * 1024
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
_READ = ("read_file", "list_dir", "resolve_path")
_EDIT = ("write_file", "edit_file")
_AGENT = ("sessions_spawn", "subagents", "agents_list")
TOOL_ALIASES: dict[str, tuple[str, ...]] = {
    # Copilot aliases
    "read": _READ,
    "edit": _EDIT,
    "execute": ("exec",),
    "shell": ("exec",),
    "search": ("list_dir", "recall"),
    "agent": _AGENT,
    "custom-agent": _AGENT,
    "todo": ("task_complete",),
    # Claude Code names
    "bash": ("exec",),
    "powershell": ("exec",),
    "notebookread": ("read_file",),
    "write": ("write_file",),
    "multiedit": ("edit_file",),
    "notebookedit": ("edit_file",),
    "grep": ("list_dir", "recall"),
    "glob": ("list_dir",),
    "task": _AGENT,
    "memory": ("remember", "recall", "forget"),
}
"""Tool names of other tools' agent files (lower case) -> familiar's tool names."""


@dataclass(frozen=True, slots=True)
class AgentSource:
    """A directory of agent files and the pattern their names match."""

    directory: Path
    pattern: str

    def files(self) -> list[Path]:
        try:
            return sorted(p for p in self.directory.glob(self.pattern) if p.is_file())
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


class _Bad(ValueError):
    def __init__(self, message: str, line: int | None = None) -> None:
        super().__init__(message)
        self.line = line


def load_agent_files(
    sources: Sequence[AgentSource],
) -> tuple[list[AgentSpec], list[AgentFileProblem]]:
    """Parse every file of ``sources`` (in order); bad ones become problems."""
    agents: list[AgentSpec] = []
    problems: list[AgentFileProblem] = []
    seen: set[str] = set()
    for source in sources:
        for path in source.files():
            try:
                raw = path.read_bytes()[: _MAX_FILE_BYTES + 1]
                if len(raw) > _MAX_FILE_BYTES:
                    raise _Bad(f"larger than {_MAX_FILE_BYTES} bytes")
                spec = parse_agent(raw.decode("utf-8"), path=path)
            except _Bad as exc:
                problems.append(AgentFileProblem(str(path), exc.line, str(exc)))
                continue
            except (OSError, UnicodeDecodeError) as exc:
                problems.append(AgentFileProblem(str(path), None, f"cannot read: {exc}"))
                continue
            if spec.name in seen:
                log.info("agent %s from %s is shadowed by an earlier file", spec.name, path)
                continue
            seen.add(spec.name)
            agents.append(spec)
    return agents, problems


def parse_agent(text: str, *, path: Path) -> AgentSpec:
    """One agent file's text -> its AgentSpec.

    Raises:
        ValueError: no or unparsable front matter, or a field of the wrong kind (its
            ``line`` attribute is the 1-based line in the file, when known).
    """
    import yaml  # only a home with agent files pays for the YAML parser

    front, body = _split(text)
    try:
        data = yaml.safe_load(front) if front.strip() else {}
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = None if mark is None else mark.line + 2  # +1 for 1-based, +1 for the ---
        raise _Bad(f"bad YAML front matter: {exc.problem or exc}", line) from None
    except yaml.YAMLError as exc:
        raise _Bad(f"bad YAML front matter: {exc}", 2) from None
    if not isinstance(data, dict):
        raise _Bad("the front matter must be a mapping of fields", 2)
    lines = _key_lines(front)
    stem = path.name.removesuffix(".md").removesuffix(".agent")
    name = _text(data, "name", lines) or stem
    if not _NAME.fullmatch(name):
        raise _Bad(
            f"name {name!r} must be 1-128 letters, digits or ._- (starting with a letter or digit)",
            lines.get("name", 2),
        )
    description = _text(data, "description", lines)
    if not description:
        raise _Bad("'description' is required", lines.get("description", 2))
    mode = _text(data, "memory_share_mode", lines) or _text(data, "memory-share-mode", lines)
    if mode is not None and mode not in MEMORY_SHARE_MODES:
        raise _Bad(
            f"memory_share_mode {mode!r} is not one of {', '.join(MEMORY_SHARE_MODES)}",
            lines.get("memory_share_mode", lines.get("memory-share-mode")),
        )
    model = _model(data.get("model"), lines)
    return AgentSpec(
        name=name,
        description=" ".join(description.split()),
        tools=_tools(data.get("tools"), lines),
        memory_share_mode=mode,
        model=model,
        instructions=body.strip(),
        source=str(path),
        skills=_skills(data.get("skills"), lines),
    )


def _skills(value: object, lines: dict[str, int]) -> tuple[str, ...] | None:
    """``skills``: the Agent Skills the agent sees (a list, or names split by commas)."""
    if value is None:
        return None
    names = value.replace(",", " ").split() if isinstance(value, str) else value
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise _Bad("'skills' must be a list of skill names", lines.get("skills"))
    return tuple(dict.fromkeys(n.strip() for n in names if n.strip()))


def _split(text: str) -> tuple[str, str]:
    lines = text.lstrip("\ufeff").splitlines()
    if not lines or lines[0].strip() != "---":
        raise _Bad("no YAML front matter: the file must start with a --- line", 1)
    for index in range(1, len(lines)):
        if lines[index].strip() in ("---", "..."):
            return "\n".join(lines[1:index]), "\n".join(lines[index + 1 :])
    raise _Bad("the front matter is not closed by a --- line", len(lines))


def _key_lines(front: str) -> dict[str, int]:
    found: dict[str, int] = {}
    for index, line in enumerate(front.splitlines()):
        key, colon, _ = line.partition(":")
        if colon and key and not key[0].isspace():
            found.setdefault(key.strip(), index + 2)
    return found


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
    value = value.strip()
    return None if not value or value.lower() == "inherit" else value


def _tools(value: object, lines: dict[str, int]) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str):
        names: Iterable[object] = [v for v in value.split(",") if v.strip()]
    elif isinstance(value, list):
        names = value
    else:
        raise _Bad("'tools' must be a list or a comma separated string", lines.get("tools"))
    mapped: list[str] = []
    for raw in names:
        if not isinstance(raw, str):
            raise _Bad(f"tool {raw!r} must be text", lines.get("tools"))
        for name in _tool_names(raw.strip()):
            if name not in mapped:
                mapped.append(name)
    if "*" in mapped:
        return None
    return tuple(mapped)


def _tool_names(raw: str) -> tuple[str, ...]:
    base = raw.split("(", 1)[0].strip()  # Claude's Agent(worker) / Bash(git *)
    alias = TOOL_ALIASES.get(base.lower())
    if alias is not None:
        return alias
    if base.startswith("mcp__") and "__" not in base.removeprefix("mcp__"):
        return (f"{base}__*",)  # Claude's mcp__<server>: every tool of that server
    if "/" in base:  # Copilot / VS Code MCP forms: server/tool, server/*
        server, _, tool = base.partition("/")
        return (f"mcp__{server}__{tool or '*'}",)
    return (base,) if base else ()
