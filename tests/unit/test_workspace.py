"""Tests for workspace scaffolding and the heartbeat check."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

import pytest

from core.workspace import heartbeat_is_actionable, scaffold_workspace

EXPECTED = {
    "AGENTS.md",
    "SOUL.md",
    "USER.md",
    "TOOLS.md",
    "IDENTITY.md",
    "HEARTBEAT.md",
    "memory/MEMORY.md",
}


def _relative(paths: list[Path], root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in paths}


def test_scaffold_creates_every_template_file(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    created = scaffold_workspace(workspace)
    assert _relative(created, workspace) == EXPECTED
    for name in EXPECTED:
        text = (workspace / name).read_text(encoding="utf-8")
        template = files("workspace_template").joinpath(*name.split("/")).read_text("utf-8")
        assert text == template
        assert text.startswith("# ")
        assert 10 <= len(text.splitlines()) <= 40, name


def test_scaffold_skips_package_files(tmp_path: Path) -> None:
    scaffold_workspace(tmp_path)
    assert not (tmp_path / "__init__.py").exists()
    assert not (tmp_path / "__pycache__").exists()


def test_scaffold_never_overwrites_and_is_idempotent(tmp_path: Path) -> None:
    scaffold_workspace(tmp_path)
    user_file = tmp_path / "USER.md"
    user_file.write_text("# Me\n- Name: Ada\n", encoding="utf-8")
    (tmp_path / "SOUL.md").unlink()

    created = scaffold_workspace(tmp_path)

    assert created == [tmp_path / "SOUL.md"]
    assert user_file.read_text(encoding="utf-8") == "# Me\n- Name: Ada\n"
    assert scaffold_workspace(tmp_path) == []


def test_scaffold_does_not_follow_a_dangling_symlink(tmp_path: Path) -> None:
    outside = tmp_path / "outside.md"
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "AGENTS.md").symlink_to(outside)

    created = scaffold_workspace(workspace)

    assert workspace / "AGENTS.md" not in created
    assert not outside.exists()


def test_scaffold_skips_file_whose_directory_is_blocked(tmp_path: Path) -> None:
    (tmp_path / "memory").write_text("not a directory", encoding="utf-8")
    created = scaffold_workspace(tmp_path)
    assert _relative(created, tmp_path) == EXPECTED - {"memory/MEMORY.md"}
    assert (tmp_path / "memory").read_text(encoding="utf-8") == "not a directory"


def test_default_heartbeat_is_not_actionable() -> None:
    text = files("workspace_template").joinpath("HEARTBEAT.md").read_text("utf-8")
    assert not heartbeat_is_actionable(text)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   \n\n",
        "# Heartbeat\n\n## Tasks\n",
        "<!-- a comment -->",
        "# H\n<!--\nmulti\n- line with a list item\n-->\n## Tasks\n",
        "# H\n- \n- [ ]\n* [x]\n1.\n",
        "# H\n---\n",
        "# H\n<!-- unclosed comment\nstill comment\n",
    ],
)
def test_heartbeat_not_actionable(text: str) -> None:
    assert not heartbeat_is_actionable(text)


@pytest.mark.parametrize(
    "text",
    [
        "Check my inbox.",
        "# Tasks\n- Remind me to water the plants\n",
        "# Tasks\n- [ ] Review pull requests\n",
        "<!-- note --> Check the weather",
        "<!--\ncomment\n-->\nSummarise the news",
        "#hashtag is not a heading",
    ],
)
def test_heartbeat_actionable(text: str) -> None:
    assert heartbeat_is_actionable(text)
