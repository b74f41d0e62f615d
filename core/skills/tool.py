"""The ``skill`` tool: load a skill's instructions, or read one of its files."""

from __future__ import annotations

import asyncio
import difflib
import re

from core.errors import ToolRetry
from core.skills.catalog import SkillCatalog
from core.skills.files import list_skill_files, read_skill_file
from core.skills.model import Skill
from core.skills.prompt import SKILL_TOOL
from core.tools.base import Tool, ToolContext
from core.tools.decorator import Dep, tool

__all__ = ["ALWAYS_ALLOWED", "activate", "skill_tools"]

ALWAYS_ALLOWED = (SKILL_TOOL, "task_complete")
"""Tools an active skill's ``allowed-tools`` never takes away: reading the skill's own
files, and ending an autopilot task."""
_MAX_MATCHES = 20
_WORD = re.compile(r"[a-z0-9]{3,}")


def skill_tools(*, max_bytes: int) -> list[Tool]:
    """The ``skill`` tool.

    Args:
        max_bytes: the cap of a file read through ``path`` (``tools.max_file_bytes``).
    """

    @tool(name=SKILL_TOOL)
    async def skill(
        ctx: ToolContext, catalog: Dep[SkillCatalog], name: str, path: str | None = None
    ) -> str:
        """Load a skill listed under "Skills": its instructions and the list of its files.
        Once a skill with allowed-tools is loaded, only those tools run until this
        message is answered.

        Args:
            name: the skill's name as listed (or a keyword, to find skills).
            path: read this file of the skill instead, relative to its folder (e.g.
                "references/REFERENCE.md"); needed for skills outside the workspace.
        """
        found = await catalog.find(name.strip(), ctx.skills)
        if found is None:
            raise ToolRetry(await _not_found(catalog, name, ctx.skills))
        activate(ctx, found)
        if path is not None:
            return await asyncio.to_thread(read_skill_file, found, path, max_bytes=max_bytes)
        files, cut = await asyncio.to_thread(list_skill_files, found)
        return _loaded(found, files, cut)

    return [skill]


def activate(ctx: ToolContext, skill: Skill) -> None:
    """Make ``skill`` active for the rest of the message: its ``allowed-tools`` (if any)
    bind every later tool call of this message (`core.tools.restrictions`)."""
    if skill.allowed_tools is not None:
        ctx.restrictions.add(
            f"the allowed-tools of skill {skill.name!r} (active until this message is answered)",
            (*skill.allowed_tools, *ALWAYS_ALLOWED),
        )


def _loaded(skill: Skill, files: list[str], cut: bool) -> str:
    folder = skill.display_folder()
    if skill.source.scope == "workspace":
        where = (
            f"Skill folder: {folder} (in the workspace: read its files with read_file at "
            f"{folder}/<file>; run its scripts with exec from the workspace)."
        )
    else:
        where = (
            f"Skill folder: {folder} (outside the workspace: read a file with "
            f'{SKILL_TOOL}(name="{skill.name}", path="<file>"); exec cannot see it).'
        )
    lines = [f'<skill_content name="{skill.name}">', skill.body, "", where]
    lines.append("Relative paths in this skill are relative to its folder.")
    if skill.compatibility:
        lines.append(f"Compatibility: {skill.compatibility}")
    if skill.allowed_tools is not None:
        allowed = ", ".join((*skill.allowed_tools, *ALWAYS_ALLOWED))
        lines.append(
            f"allowed-tools: until this message is answered, only these tools run: {allowed}."
        )
    if files:
        lines += ["<skill_resources>", *files]
        if cut:
            lines.append("[... more files not listed ...]")
        lines.append("</skill_resources>")
    lines.append("</skill_content>")
    return "\n".join(lines)


async def _not_found(catalog: SkillCatalog, name: str, allowed: tuple[str, ...] | None) -> str:
    visible = await catalog.visible(allowed)
    if not visible:
        return "there are no skills to load here"
    words = set(_WORD.findall(name.lower()))
    names = [s.name for s in visible]
    close = difflib.get_close_matches(name.strip(), names, n=5, cutoff=0.6)
    matching = [
        s.name
        for s in visible
        if s.name not in close and words & set(_WORD.findall(f"{s.name} {s.description}".lower()))
    ]
    found = [*close, *matching][:_MAX_MATCHES]
    if found:
        return f"no skill {name!r}; skills that match: {', '.join(found)}"
    return f"no skill {name!r} and none matches it; skills: {', '.join(names[:_MAX_MATCHES])}"
