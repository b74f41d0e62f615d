"""Agent Skills on disk: every documented place, the spec's fields, what does not load."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from core.errors import ToolRetry
from core.skills.files import list_skill_files, load_skills, read_skill_file
from core.skills.model import Skill, SkillProblem, default_skill_sources
from core.skills.parse import SkillFileError, map_allowed_tools, parse_skill_text

PDF_SKILL = """---
name: pdf-forms
description: >-
  Fills PDF forms and extracts their fields. Use when the user mentions a PDF
  form, fillable fields or AcroForm.
license: Apache-2.0
compatibility: Requires python3 and the pypdf package
metadata:
  author: familiar-tests
  version: "1.2"
allowed-tools: Bash(python3 scripts/fill.py:*) Read mcp__pdfserver
---

# Filling PDF forms

1. Run `scripts/list_fields.py <file>` to see the fields.
2. Read [the field reference](references/FIELDS.md) for the odd ones.
"""


def write_skill(root: Path, folder: str, text: str, **files: str) -> Path:
    path = root / folder
    path.mkdir(parents=True, exist_ok=True)
    (path / "SKILL.md").write_text(text)
    for relative, content in files.items():
        target = path / relative.replace("__", "/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content)
    return path / "SKILL.md"


def simple(name: str, description: str = "Does a thing. Use when asked.") -> str:
    return f"---\nname: {name}\ndescription: {description}\n---\nSteps for {name}.\n"


def by_name(skills: list[Skill]) -> dict[str, Skill]:
    return {s.name: s for s in skills}


def test_every_field_of_the_spec_is_read() -> None:
    parsed = parse_skill_text(PDF_SKILL, folder_name="pdf-forms")
    assert parsed.name == "pdf-forms"
    assert parsed.description.startswith("Fills PDF forms and extracts their fields. Use when")
    assert parsed.license == "Apache-2.0"
    assert parsed.compatibility == "Requires python3 and the pypdf package"
    assert parsed.metadata == {"author": "familiar-tests", "version": "1.2"}
    assert parsed.allowed_tools_raw == ("Bash(python3 scripts/fill.py:*)", "Read", "mcp__pdfserver")
    assert parsed.allowed_tools == (
        "exec",
        "read_file",
        "list_dir",
        "resolve_path",
        "mcp__pdfserver__*",
    )
    assert parsed.body.startswith("# Filling PDF forms")
    assert parsed.warnings == ()


def test_allowed_tools_in_the_shapes_clients_write() -> None:
    assert map_allowed_tools(["Read", "Grep", "Glob", "WebFetch"]) == (
        "read_file",
        "list_dir",
        "resolve_path",
        "WebFetch",  # no such tool here: it allows nothing
    )
    assert map_allowed_tools(["exec", "github/create_issue"]) == (
        "exec",
        "mcp__github__create_issue",
    )
    listed = "---\nname: a\ndescription: d\nallowed-tools:\n  - Read\n  - Bash(git add:*)\n---\n"
    assert parse_skill_text(listed, folder_name="a").allowed_tools_raw == (
        "Read",
        "Bash(git add:*)",
    )
    commas = "---\nname: a\ndescription: d\nallowed-tools: Read, Write\n---\n"
    assert parse_skill_text(commas, folder_name="a").allowed_tools == (
        "read_file",
        "list_dir",
        "resolve_path",
        "write_file",
        "edit_file",
    )


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ("---\nname: x\n---\nbody\n", 2, "'description' is required"),
        ("---\nname: x\ndescription: ''\n---\n", 3, "'description' is required"),
        ("# no front matter\n", 1, "no YAML front matter"),
        ("---\nname: x\ndescription: d\n", 3, "not closed"),
        ("---\nname: x\ndescription: [unclosed\nlicense: MIT\n---\n", 4, "bad YAML"),
        ("---\nname: Has Spaces\ndescription: d\n---\n", 2, "not usable"),
        ("---\nname: x\ndescription: d\nallowed-tools: {a: 1}\n---\n", 4, "allowed-tools must"),
        ("---\nname: x\ndescription:\n  nested: map\n---\n", 3, "'description' must be text"),
    ],
)
def test_what_does_not_load_names_its_line(text: str, line: int, message: str) -> None:
    with pytest.raises(SkillFileError) as caught:
        parse_skill_text(text, folder_name="x")
    assert caught.value.line == line
    assert message in str(caught.value)


def test_lenient_where_other_clients_are() -> None:
    # An unquoted ": " in a value: invalid YAML that Claude Code and Copilot accept.
    text = "---\nname: colon\ndescription: Use when: the user asks about PDFs\n---\nDo it.\n"
    parsed = parse_skill_text(text, folder_name="colon")
    assert parsed.description == "Use when: the user asks about PDFs"
    [(line, message)] = parsed.warnings
    assert line == 3 and "read leniently" in message
    # A name that breaks the spec, or differs from its folder, loads with a warning.
    upper = parse_skill_text(simple("PDF-Tools"), folder_name="pdf")
    assert upper.name == "PDF-Tools"
    assert [line for line, _ in upper.warnings] == [2, 2]
    assert "breaks the spec" in upper.warnings[0][1]
    assert "does not match its folder 'pdf'" in upper.warnings[1][1]
    # No name: the folder's (as Claude Code does).
    nameless = parse_skill_text("---\ndescription: d\n---\n", folder_name="from-folder")
    assert nameless.name == "from-folder"
    assert "no 'name'" in nameless.warnings[0][1]
    # Claude Code's own keys are ignored; disable-model-invocation is honoured.
    claude = (
        "---\nname: deploy\ndescription: Deploys\ndisable-model-invocation: true\n"
        "argument-hint: [env]\nhooks:\n  PreToolUse: []\n---\nDeploy.\n"
    )
    assert parse_skill_text(claude, folder_name="deploy").model_invocable is False


def test_skills_load_from_every_documented_place(tmp_path: Path) -> None:
    workspace, home = tmp_path / "ws", tmp_path / "home"
    places = {
        "in-skills": workspace / "skills",
        "in-agents": workspace / ".agents" / "skills",
        "in-github": workspace / ".github" / "skills",
        "in-claude": workspace / ".claude" / "skills",
        "in-home": home / "skills",
    }
    for name, root in places.items():
        write_skill(root, name, simple(name))
    skills, problems = load_skills(default_skill_sources(workspace, home))
    assert problems == []
    found = by_name(skills)
    assert list(found) == list(places)  # precedence order
    for name, root in places.items():
        assert found[name].file == root / name / "SKILL.md"
        assert found[name].body == f"Steps for {name}."
    assert found["in-agents"].display_folder() == ".agents/skills/in-agents"
    assert found["in-home"].display_folder() == "$FAMILIAR_HOME/skills/in-home"
    assert found["in-home"].source.scope == "home"


def test_the_first_place_wins_a_name_clash_and_the_other_is_reported(tmp_path: Path) -> None:
    workspace, home = tmp_path / "ws", tmp_path / "home"
    first = write_skill(workspace / ".agents" / "skills", "dup", simple("dup", "Workspace one."))
    later = write_skill(home / "skills", "dup", simple("dup", "Home one."))
    skills, problems = load_skills(default_skill_sources(workspace, home))
    assert [s.description for s in skills] == ["Workspace one."]
    assert problems == [
        SkillProblem(
            str(later),
            None,
            f"duplicate: skill 'dup' is already loaded from {first}, which comes first; "
            "this one is not used",
            severity="warning",
            skill="dup",
        )
    ]


def test_a_broken_skill_is_reported_and_the_rest_load(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    root = workspace / ".claude" / "skills"
    write_skill(root, "good", simple("good"))
    broken = write_skill(root, "broken", "---\nname: broken\n---\nNo description.\n")
    (root / "notes").mkdir()  # a folder without SKILL.md is not a skill
    (root / "SKILL.md").write_text(simple("loose"))
    skills, problems = load_skills(default_skill_sources(workspace, None))
    assert [s.name for s in skills] == ["good"]
    assert [(p.file, p.line, p.severity) for p in problems] == [
        (str(root / "SKILL.md"), None, "error"),
        (str(broken), 2, "error"),
    ]
    assert "a skill is a folder of its own" in problems[0].message


def test_workspace_links_do_not_lead_out(tmp_path: Path) -> None:
    workspace, outside = tmp_path / "ws", tmp_path / "outside"
    write_skill(outside, "escaped", simple("escaped"))
    root = workspace / "skills"
    root.mkdir(parents=True)
    os.symlink(outside / "escaped", root / "escaped")
    write_skill(workspace / ".agents" / "skills", "real", simple("real"))
    os.symlink(workspace / ".agents" / "skills" / "real", root / "linked")  # inside: fine
    planted = root / "planted"
    planted.mkdir()
    os.symlink(outside / "escaped" / "SKILL.md", planted / "SKILL.md")
    skills, problems = load_skills(default_skill_sources(workspace, None))
    assert [s.name for s in skills] == ["real"]  # one folder, reached twice: no duplicate
    assert {(p.file, p.message) for p in problems} == {
        (str(root / "escaped"), "a link out of the workspace: not followed"),
        (str(planted / "SKILL.md"), "not a regular file (links are not followed)"),
    }


def test_home_skill_files_are_read_inside_its_folder_only(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / "config.toml").parent.mkdir(parents=True)
    (home / "config.toml").write_text("secret = 1\n")
    checkout = tmp_path / "checkout" / "pdf-forms"
    write_skill(
        checkout.parent,
        "pdf-forms",
        PDF_SKILL,
        references__FIELDS="Field types: text, checkbox.\n",
        scripts__list_fields="print('fields')\n",
    )
    (home / "skills").mkdir()
    os.symlink(checkout, home / "skills" / "pdf-forms")  # the operator's link is followed
    os.symlink(home / "config.toml", checkout / "leak.md")
    [skill], problems = load_skills(default_skill_sources(tmp_path / "ws", home))
    assert problems == []
    assert read_skill_file(skill, "references/FIELDS", max_bytes=1000).startswith("Field types")
    assert read_skill_file(skill, "./references/FIELDS", max_bytes=5) == (
        "Field\n[... truncated: ./references/FIELDS is 29 bytes, showing the first 5 ...]"
    )
    for escape in ("../../home/config.toml", "/etc/passwd", "references/../../x", "", "."):
        with pytest.raises(ToolRetry):
            read_skill_file(skill, escape, max_bytes=1000)
    with pytest.raises(ToolRetry, match="reached without a link"):
        read_skill_file(skill, "leak.md", max_bytes=1000)
    files, cut = list_skill_files(skill)
    assert files == ["references/FIELDS", "scripts/list_fields"]  # no SKILL.md, no link
    assert cut is False
