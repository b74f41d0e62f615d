"""Custom agent files in the formats users keep (familiar, Copilot/VS Code, Claude Code)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from core.providers.aliases import ModelAliases
from core.tasks.agent_files import AgentSource, load_agent_files, parse_agent
from core.tasks.agent_tools import BUILTIN_TOOLS, ToolVocabulary
from core.tasks.catalog import AgentCatalog, home_agent_sources

COPILOT = """---
name: reviewer
description: Reviews diffs for security bugs
tools: [read, search, "github/*"]
model: Claude Sonnet 4.5
memory_share_mode: isolated
---
Review the diff you are given. Report only real problems.
"""

CLAUDE = """---
name: doc-writer
description: Writes documentation from code
tools: Read, Grep, Glob, Edit
model: inherit
memory_share_mode: inherit-readonly
permissionMode: acceptEdits
---

You write clear docs.
"""

FAMILIAR = """---
description: Summarises the notes folder
tools:
  - read_file
  - list_dir
memory_share_mode: handoff
---
Summarise notes/ in five bullets.
"""


def test_copilot_agent_maps_aliases_and_mcp_forms(tmp_path: Path) -> None:
    github = ToolVocabulary.of(BUILTIN_TOOLS, ["github"])
    models = ModelAliases.of({"Claude Sonnet 4.5": "claude-sonnet-4-5"})
    spec = parse_agent(
        COPILOT, path=tmp_path / "reviewer.agent.md", vocabulary=github, models=models
    )
    assert spec.name == "reviewer"
    assert spec.description == "Reviews diffs for security bugs"
    assert spec.tools == ("read_file", "list_dir", "resolve_path", "mcp__github__*")
    assert spec.unmapped_tools == ()
    assert spec.model == "claude-sonnet-4-5"
    assert spec.requested_model == "Claude Sonnet 4.5"
    assert spec.memory_share_mode == "isolated"
    assert spec.instructions == "Review the diff you are given. Report only real problems."


def test_claude_agent_comma_tools_inherit_model_and_unknown_keys(tmp_path: Path) -> None:
    spec = parse_agent(CLAUDE, path=tmp_path / "x.md")
    assert spec.name == "doc-writer"
    # Read -> the read tools, Grep/Glob -> list_dir, Edit -> write and edit.
    assert spec.tools == ("read_file", "list_dir", "resolve_path", "write_file", "edit_file")
    assert spec.model is None
    assert spec.memory_share_mode == "inherit-readonly"
    assert spec.instructions == "You write clear docs."


def test_familiar_agent_takes_its_name_from_the_file(tmp_path: Path) -> None:
    spec = parse_agent(FAMILIAR, path=tmp_path / "notes-summary.md")
    assert spec.name == "notes-summary"
    assert spec.tools == ("read_file", "list_dir")
    assert spec.memory_share_mode == "handoff"


def test_star_or_missing_tools_mean_every_tool(tmp_path: Path) -> None:
    text = "---\ndescription: d\ntools: ['*']\n---\nbody\n"
    assert parse_agent(text, path=tmp_path / "a.md").tools is None
    assert parse_agent("---\ndescription: d\n---\n", path=tmp_path / "b.md").tools is None


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ("no front matter\n", 1, "no YAML front matter"),
        ("---\ndescription: d\n", 2, "not closed"),
        ("---\nname: x\ndescription: [unclosed\n---\n", 3, "bad YAML"),
        ("---\nname: x\n---\nbody\n", 2, "'description' is required"),
        ("---\ndescription: d\nmemory_share_mode: shared\n---\n", 3, "memory_share_mode"),
        ("---\ndescription: d\ntools: 3\n---\n", 3, "'tools' must be"),
    ],
)
def test_bad_files_are_reported_with_file_and_line(
    tmp_path: Path, text: str, line: int, message: str
) -> None:
    folder = tmp_path / "agents"
    folder.mkdir()
    (folder / "bad.md").write_text(text)
    (folder / "good.md").write_text(FAMILIAR)
    found = load_agent_files([AgentSource(folder, "*.md")])
    assert [a.name for a in found.agents] == ["good"]
    (problem,) = found.problems
    assert problem.path == str(folder / "bad.md")
    assert problem.line == line
    assert message in problem.message
    assert str(problem).startswith(f"{folder / 'bad.md'}:{line}: ")


async def test_catalog_reads_every_place_and_rereads_changed_files(tmp_path: Path) -> None:
    workspace, home = tmp_path / "ws", tmp_path / "home"
    for folder, name, text in [
        (workspace / "agents", "notes-summary.md", FAMILIAR),
        (workspace / ".github" / "agents", "reviewer.agent.md", COPILOT),
        (workspace / ".claude" / "agents", "writer.md", CLAUDE),
        (home / "agents", "mine.md", "---\ndescription: the user's own\n---\nhi\n"),
        (workspace / ".github" / "agents", "README.md", "# Our agents\n"),  # not an agent
    ]:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    catalog = AgentCatalog(sources=home_agent_sources(workspace, home), recheck_seconds=0)
    agents = await catalog.agents()
    assert set(agents) == {
        "general-purpose",
        "explore",
        "task",
        "rubber-duck",
        "code-review",
        "research",
        "rem-agent",
        "notes-summary",
        "reviewer",
        "doc-writer",
        "mine",
    }
    assert catalog.problems == ()
    target = workspace / "agents" / "notes-summary.md"
    target.write_text(FAMILIAR.replace("Summarises the notes folder", "Now summarises logs"))
    stat = target.stat()
    os.utime(target, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    assert (await catalog.agents())["notes-summary"].description == "Now summarises logs"
    (workspace / "agents" / "broken.md").write_text("---\nname: [\n---\n")
    agents = await catalog.agents()
    assert "notes-summary" in agents
    assert [p.path for p in catalog.problems] == [str(workspace / "agents" / "broken.md")]
