"""The skill catalog: the prompt's budget, an agent's ``skills`` list, change detection."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from core.skills.catalog import SkillCatalog
from core.skills.config import SkillsConfig
from core.skills.model import default_skill_sources
from core.skills.prompt import skills_section
from core.tasks.agent_files import parse_agent
from tests.unit.test_skills_files import simple, write_skill

LONG = (
    "Reviews pull requests for security bugs, missing tests and unclear names. Use when "
    "the user asks for a review, mentions a PR or a diff, or wants a second opinion on a "
    "change before merging it. Covers Python, TypeScript and Go."
)


def catalog(workspace: Path, home: Path | None = None, **config: int) -> SkillCatalog:
    return SkillCatalog(
        sources=default_skill_sources(workspace, home),
        config=SkillsConfig(**config),
        recheck_seconds=0,
    )


async def test_the_section_stays_within_its_budget_with_400_skills(tmp_path: Path) -> None:
    root = tmp_path / "ws" / ".agents" / "skills"
    for index in range(400):
        write_skill(root, f"skill-{index:03}", simple(f"skill-{index:03}", LONG))
    skills = catalog(tmp_path / "ws", prompt_max_chars=4000, description_max_chars=120)
    section = await skills.section(None)
    assert section is not None
    assert len(section) <= 4000
    assert section.startswith("## Skills\n")
    listed = [line for line in section.splitlines() if line.startswith("- skill-")]
    assert listed[0] == f"- skill-000: {LONG[:119]}…"
    assert 20 <= len(listed) < 400
    assert "More skills (call `skill` with a name, or a keyword to find others): " in section
    assert section.rstrip().endswith("more")
    every = list((await skills.skills()).values())
    for budget in (400, 1000, 2500):
        text = skills_section(every, max_chars=budget, description_max_chars=250)
        assert text is not None and len(text) <= budget
        assert text.rstrip().endswith("more") or "more skills are not listed" in text
    assert skills_section(every, max_chars=100, description_max_chars=250) is None


async def test_few_skills_are_all_listed_and_none_is_no_section(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    assert await catalog(workspace).section(None) is None
    write_skill(workspace / "skills", "alpha", simple("alpha", "Alpha things."))
    write_skill(workspace / "skills", "beta", simple("beta", "Beta things."))
    section = await catalog(workspace).section(None)
    assert section is not None
    assert section.endswith("- alpha: Alpha things.\n- beta: Beta things.")
    assert await catalog(workspace, prompt_max_chars=0).section(None) is None


async def test_an_agent_skills_list_limits_what_it_sees(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    for name in ("alpha", "beta", "gamma"):
        write_skill(workspace / "skills", name, simple(name))
    hidden = "---\nname: manual\ndescription: Only by hand\ndisable-model-invocation: true\n---\n"
    write_skill(workspace / "skills", "manual", hidden)
    skills = catalog(workspace)
    assert [s.name for s in await skills.visible(None)] == ["alpha", "beta", "gamma"]
    assert [s.name for s in await skills.visible(("gamma", "alpha", "nope"))] == [
        "alpha",
        "gamma",
    ]
    assert await skills.visible(()) == []
    assert await skills.section(()) is None
    section = await skills.section(("beta",))
    assert section is not None and "- beta:" in section and "alpha" not in section
    assert await skills.find("alpha", ("beta",)) is None
    assert await skills.find("manual", None) is None
    found = await skills.find("beta", ("beta",))
    assert found is not None and found.name == "beta"


async def test_added_edited_and_removed_skills_show_up(tmp_path: Path) -> None:
    workspace, home = tmp_path / "ws", tmp_path / "home"
    skills = catalog(workspace, home)
    assert await skills.skills() == {}
    file = write_skill(home / "skills", "notes", simple("notes", "First words."))
    assert [s.description for s in (await skills.skills()).values()] == ["First words."]
    file.write_text(simple("notes", "Second words, longer."))
    assert [s.description for s in (await skills.skills()).values()] == ["Second words, longer."]
    section = await skills.section(None)
    assert section is not None and "Second words" in section
    file.write_text("---\nname: notes\n---\n")  # broken now: reported, gone
    assert await skills.skills() == {}
    [problem] = skills.problems
    assert (problem.file, problem.line) == (str(file), 2)
    os.remove(file)
    assert await skills.skills() == {} and skills.problems == ()


def test_an_agent_file_names_its_skills(tmp_path: Path) -> None:
    path = tmp_path / "reviewer.md"
    listed = "---\ndescription: Reviews\nskills:\n  - pdf-forms\n  - notes\n---\nGo.\n"
    assert parse_agent(listed, path=path).skills == ("pdf-forms", "notes")
    commas = "---\ndescription: Reviews\nskills: pdf-forms, notes\n---\n"
    assert parse_agent(commas, path=path).skills == ("pdf-forms", "notes")
    assert parse_agent("---\ndescription: Reviews\n---\n", path=path).skills is None
    assert parse_agent("---\ndescription: R\nskills: []\n---\n", path=path).skills == ()
    with pytest.raises(ValueError, match="'skills' must be a list") as caught:
        parse_agent("---\ndescription: Reviews\nskills: {a: 1}\n---\n", path=path)
    assert getattr(caught.value, "line", None) == 3
