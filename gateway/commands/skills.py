"""``familiar skills list``: the Agent Skills the agent sees, where from, and what did not load."""

from __future__ import annotations

from pathlib import Path

import click
from rich.table import Table

from core.errors import ConfigError
from core.skills.files import load_skills
from core.skills.model import Skill, SkillProblem, default_skill_sources
from gateway.commands.common import (
    command_group,
    fail,
    home_option,
    json_option,
    print_json,
    resolve_home,
    stdout_console,
)
from gateway.commands.output import add_row, styled
from gateway.config import load_config, workspace_dir

__all__ = ["read_skills", "skills_app"]

skills_app = command_group()

_DESCRIPTION_CHARS = 70


def read_skills(home: Path) -> tuple[bool, list[Skill], list[SkillProblem]]:
    """Whether skills are on, and what the gateway reads: the same files, the same rules.

    Raises:
        ConfigError: the configuration is invalid.
    """
    config = load_config(home)
    skills, problems = load_skills(default_skill_sources(workspace_dir(home, config), home))
    return config.skills.enabled, skills, problems


@skills_app.command("list")
@json_option()
@home_option
def list_skills(as_json: bool, home: Path | None) -> None:
    """Every skill: its name, where it was read from and its allowed-tools; then each file
    that did not load (or loaded with a warning), with its line.

    Read from the workspace's skills/, .agents/skills/, .github/skills/, .claude/skills/
    and $FAMILIAR_HOME/skills/, in that order of precedence.
    """
    try:
        enabled, skills, problems = read_skills(resolve_home(home))
    except ConfigError as exc:
        raise fail(str(exc)) from None
    if as_json:
        print_json(
            {
                "enabled": enabled,
                "skills": [s.as_json() for s in skills],
                "problems": [p.as_json() for p in problems],
            }
        )
        return
    if not enabled:
        click.echo("Skills are off (skills.enabled = false); the agent sees none of these.")
    if skills:
        table = Table("skill", "source", "allowed-tools", "description", box=None)
        for skill in skills:
            add_row(table, skill.name, skill.source.label, _allowed(skill), _short(skill))
        stdout_console().print(table)
    elif not problems:
        click.echo(
            "No skills. A skill is a folder with a SKILL.md, in the workspace's skills/, "
            ".agents/skills/, .github/skills/ or .claude/skills/, or in $FAMILIAR_HOME/skills/."
        )
    console = stdout_console()
    for problem in problems:
        kind = ("warning", "yellow") if problem.severity == "warning" else ("not loaded", "red")
        console.print(styled(kind, ": ", str(problem)), soft_wrap=True)


def _allowed(skill: Skill) -> str:
    if skill.allowed_tools is None:
        return "-"
    return ", ".join(skill.allowed_tools) or "(none)"


def _short(skill: Skill) -> str:
    text = skill.description
    if not skill.model_invocable:
        text = "(model invocation disabled) " + text
    if len(text) > _DESCRIPTION_CHARS:
        text = text[: _DESCRIPTION_CHARS - 1] + "…"
    return text
