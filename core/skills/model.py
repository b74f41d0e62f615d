"""What a loaded skill is, where skills are read from, and what did not load."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

__all__ = ["Scope", "Skill", "SkillFolder", "SkillProblem", "SkillSource", "default_skill_sources"]

Scope = Literal["workspace", "home"]


@dataclass(frozen=True, slots=True)
class SkillSource:
    """A directory of skill folders (``<root>/<name>/SKILL.md``).

    Attributes:
        anchor: the workspace, or ``$FAMILIAR_HOME``.
        relative: the skills directory below the anchor (``.agents/skills``).
        scope: ``workspace`` skills are read without following a link out of the
            workspace (``exec`` may plant one); ``home`` skills are the operator's, and a
            skill folder there may be a link (to a checkout, say).
        label: how the source is shown (``.agents/skills``, ``$FAMILIAR_HOME/skills``).
    """

    anchor: Path
    relative: str
    scope: Scope
    label: str

    @property
    def root(self) -> Path:
        return self.anchor / self.relative


@dataclass(frozen=True, slots=True)
class SkillFolder:
    """A skill's folder as ``anchor`` + ``parts``: its files are read from ``anchor``
    through ``parts`` and below without following any link (`core.workspace_read`).

    For a workspace skill the anchor is the workspace; for a home skill it is the
    folder itself (its own link, if any, resolved once at load).
    """

    anchor: Path
    parts: tuple[str, ...] = ()

    @property
    def path(self) -> Path:
        return self.anchor.joinpath(*self.parts)


@dataclass(frozen=True, slots=True, kw_only=True)
class Skill:
    """One skill of the catalog.

    Attributes:
        name: its id (the front matter's ``name``, else the folder's name).
        description: what it does and when to use it (one line, whitespace folded).
        body: the instructions (the Markdown after the front matter).
        file: the ``SKILL.md`` it was read from, as found.
        folder: how its files are reached (see `SkillFolder`).
        source: the directory it was found in.
        allowed_tools: familiar tool names or patterns its ``allowed-tools`` maps to;
            None when it has none (no restriction).
        allowed_tools_raw: ``allowed-tools`` as written.
        model_invocable: False with ``disable-model-invocation: true`` (left out of the
            catalog the model sees).
    """

    name: str
    description: str
    body: str
    file: Path
    folder: SkillFolder
    source: SkillSource
    license: str | None = None
    compatibility: str | None = None
    metadata: dict[str, str] = field(default_factory=dict)
    allowed_tools: tuple[str, ...] | None = None
    allowed_tools_raw: tuple[str, ...] = ()
    model_invocable: bool = True

    def display_folder(self) -> str:
        """The folder as the model and the operator should see it: workspace-relative for
        a workspace skill (what ``read_file`` takes), under ``$FAMILIAR_HOME`` else."""
        if self.source.scope == "workspace":
            return "/".join(self.folder.parts)
        return f"{self.source.label}/{self.file.parent.name}"

    def as_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "source": self.source.label,
            "scope": self.source.scope,
            "folder": str(self.file.parent),
            "file": str(self.file),
            "license": self.license,
            "compatibility": self.compatibility,
            "metadata": dict(self.metadata),
            "allowed_tools": None if self.allowed_tools is None else list(self.allowed_tools),
            "allowed_tools_raw": list(self.allowed_tools_raw),
            "model_invocable": self.model_invocable,
        }


@dataclass(frozen=True, slots=True)
class SkillProblem:
    """Something wrong with a skill file: where, what, and how bad.

    Attributes:
        file: the file (or folder) concerned.
        line: 1-based line in ``file``, when known.
        severity: ``error``: the skill did not load; ``warning``: it loaded all the
            same, or (a duplicate) a skill of that name loaded from another place.
        skill: the skill's name, when known.
    """

    file: str
    line: int | None
    message: str
    severity: Literal["error", "warning"] = "error"
    skill: str | None = None

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        return f"{where}: {self.message}"

    def as_json(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "line": self.line,
            "message": self.message,
            "severity": self.severity,
            "skill": self.skill,
        }


def default_skill_sources(workspace: Path, home: Path | None) -> list[SkillSource]:
    """Where skills are read from, highest precedence first: the workspace's own
    ``skills/``, the cross-client ``.agents/skills/``, then ``.github/skills/`` and
    ``.claude/skills/``, then the operator's ``$FAMILIAR_HOME/skills/``."""
    sources = [
        SkillSource(workspace, "skills", "workspace", "skills"),
        SkillSource(workspace, ".agents/skills", "workspace", ".agents/skills"),
        SkillSource(workspace, ".github/skills", "workspace", ".github/skills"),
        SkillSource(workspace, ".claude/skills", "workspace", ".claude/skills"),
    ]
    if home is not None:
        sources.append(SkillSource(home, "skills", "home", "$FAMILIAR_HOME/skills"))
    return sources
