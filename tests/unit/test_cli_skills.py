"""``familiar skills list [--json]`` and ``doctor``'s skills check, on real skill folders."""

from __future__ import annotations

import json
from pathlib import Path

from gateway.commands.doctor_check import Check
from gateway.commands.doctor_skills import skill_checks
from gateway.config import load_config
from tests.unit.test_cli_client import cli
from tests.unit.test_skills_files import PDF_SKILL, simple, write_skill


def seed(home: Path) -> dict[str, Path]:
    workspace = home / "workspace"
    return {
        "pdf": write_skill(workspace / ".github" / "skills", "pdf-forms", PDF_SKILL),
        "home": write_skill(home / "skills", "notes", simple("notes", "Keeps [bold]notes[/bold].")),
        "mismatch": write_skill(workspace / "skills", "folder-name", simple("other-name")),
        "broken": write_skill(
            workspace / ".claude" / "skills",
            "broken",
            "---\nname: broken\ndescription: Use when: asked\nlicense: [MIT\n---\n",
        ),
    }


def test_skills_list_json_reports_skills_and_problems(tmp_path: Path) -> None:
    home = tmp_path / "home"
    files = seed(home)
    result = cli("skills", "list", "--json", "--home", str(home))
    assert result.exit_code == 0, result.stderr
    listed = json.loads(result.stdout)
    assert listed["enabled"] is True
    skills = {s["name"]: s for s in listed["skills"]}
    assert list(skills) == ["other-name", "pdf-forms", "notes"]
    assert skills["pdf-forms"]["source"] == ".github/skills"
    assert skills["pdf-forms"]["file"] == str(files["pdf"])
    assert skills["pdf-forms"]["allowed_tools"] == [
        "exec",
        "read_file",
        "list_dir",
        "resolve_path",
        "mcp__pdfserver__*",
    ]
    assert skills["pdf-forms"]["metadata"] == {"author": "familiar-tests", "version": "1.2"}
    assert skills["notes"]["scope"] == "home"
    assert skills["notes"]["source"] == "$FAMILIAR_HOME/skills"
    assert skills["notes"]["allowed_tools"] is None
    problems = {(p["file"], p["line"], p["severity"]) for p in listed["problems"]}
    assert problems == {
        (str(files["mismatch"]), 2, "warning"),
        (str(files["broken"]), 3, "error"),
    }
    broken = next(p for p in listed["problems"] if p["severity"] == "error")
    assert broken["message"].startswith("bad YAML front matter")


def test_skills_list_text_prints_data_verbatim(tmp_path: Path) -> None:
    home = tmp_path / "home"
    files = seed(home)
    result = cli("skills", "list", "--home", str(home))
    assert result.exit_code == 0, result.stderr
    assert "Keeps [bold]notes[/bold]." in result.stdout
    assert "$FAMILIAR_HOME/skills" in result.stdout
    assert f"not loaded: {files['broken']}:3: bad YAML front matter" in result.stdout
    assert f"warning: {files['mismatch']}:2: name 'other-name' does not match" in result.stdout


def test_skills_off_and_none(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    result = cli("skills", "list", "--home", str(home))
    assert result.exit_code == 0 and "No skills." in result.stdout
    write_skill(home / "skills", "notes", simple("notes"))
    (home / "config.toml").write_text("[skills]\nenabled = false\n")
    listed = json.loads(cli("skills", "list", "--json", "--home", str(home)).stdout)
    assert listed["enabled"] is False and [s["name"] for s in listed["skills"]] == ["notes"]
    assert "Skills are off" in cli("skills", "list", "--home", str(home)).stdout
    (home / "config.toml").write_text("[skills]\nenabled = 3\n")
    result = cli("skills", "list", "--home", str(home))
    assert result.exit_code == 1 and "skills.enabled" in result.stderr


def test_doctor_fails_on_a_skill_that_does_not_load(tmp_path: Path) -> None:
    home = tmp_path / "home"
    files = seed(home)
    checks = skill_checks(home, load_config(home))
    assert checks[0] == Check(
        "skills",
        True,
        "3 loaded (other-name (skills), pdf-forms (.github/skills), notes ($FAMILIAR_HOME/skills))",
    )
    by_file = {c.reason.split(":", 1)[0]: c for c in checks[1:]}
    assert by_file[str(files["broken"])].ok is False
    assert by_file[str(files["mismatch"])].ok is True
    assert by_file[str(files["mismatch"])].warn is True
