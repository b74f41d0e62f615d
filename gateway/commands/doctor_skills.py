"""``familiar doctor``'s skills check: what loaded, and each file that did not (file:line)."""

from __future__ import annotations

from pathlib import Path

from core.skills.files import load_skills
from core.skills.model import default_skill_sources
from gateway.commands.doctor_check import Check
from gateway.config import FamiliarConfig, workspace_dir

__all__ = ["skill_checks"]

_SHOWN = 20


def skill_checks(home: Path, config: FamiliarConfig | None) -> list[Check]:
    """One check for the skills that loaded, and one per problem: a file that did not
    load fails; a warning (a name that breaks the spec, a duplicate shadowed by another
    place) is shown with ``!``. Blocking: run it in a thread."""
    if config is None:
        return []
    skills, problems = load_skills(default_skill_sources(workspace_dir(home, config), home))
    checks = [
        Check("skill file", p.severity == "warning", str(p), warn=p.severity == "warning")
        for p in problems
    ]
    if not config.skills.enabled:
        return [Check("skills", True, "off (skills.enabled = false)"), *checks]
    names = ", ".join(f"{s.name} ({s.source.label})" for s in skills[:_SHOWN])
    if len(skills) > _SHOWN:
        names += f", and {len(skills) - _SHOWN} more"
    return [Check("skills", True, f"{len(skills)} loaded ({names or 'none'})"), *checks]
