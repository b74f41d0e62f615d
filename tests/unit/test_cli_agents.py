"""``familiar agents list [--json]`` and ``doctor`` on agent files in the real formats."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.unit.test_cli_client import cli, plain

FIXTURES = Path(__file__).parent.parent / "fixtures" / "agents"

CONFIG = """\
[provider]
kind = "scripted"

[models]
sonnet = "claude-sonnet-4-5"
"Claude Sonnet 4.6" = "claude-sonnet-4-6"

[mcp]
import_files = false

[mcp.servers.github]
command = "github-mcp-server"
args = ["stdio"]
"""


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Path]:
    home = tmp_path / "home"
    workspace = home / "workspace"
    for source, target in [
        ("copilot/csharp-expert.agent.md", ".github/agents/csharp-expert.agent.md"),
        ("claude/code-reviewer.md", ".claude/agents/code-reviewer.md"),
        ("vscode/planner.chatmode.md", ".github/chatmodes/planner.chatmode.md"),
    ]:
        (workspace / target).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(FIXTURES / source, workspace / target)
    (workspace / ".claude" / "agents" / "broken.md").write_text("---\nname: broken\n---\nhi\n")
    (home / "agents").mkdir()
    shutil.copy(FIXTURES / "claude" / "code-reviewer.md", home / "agents" / "reviewer.md")
    (home / "config.toml").write_text(CONFIG)
    yield home


def test_agents_list_json(home: Path) -> None:
    result = cli("agents", "list", "--json", "--home", str(home))
    assert result.exit_code == 0, result.stderr
    rows = {(r["id"], r["source"]): r for r in json.loads(result.stdout)["agents"]}
    workspace = home / "workspace"
    csharp = rows["csharp-expert", str(workspace / ".github/agents/csharp-expert.agent.md")]
    assert csharp["loaded"] is True and csharp["reason"] is None
    assert csharp["display_name"] == "C# Expert"
    assert csharp["model"] == "claude-sonnet-4-6"
    assert csharp["model_requested"] == "Claude Sonnet 4.6"
    assert "exec" in csharp["tools"] and "mcp__github__*" in csharp["tools"]
    assert csharp["unmapped_tools"] == [
        "web/fetch",
        "vscode/askQuestions",
        "ms-dotnettools.csharp/symbols",
    ]
    reviewer = rows["code-reviewer", str(workspace / ".claude/agents/code-reviewer.md")]
    assert reviewer["loaded"] and reviewer["model"] == "claude-sonnet-4-5"
    assert reviewer["unmapped_tools"] == ["WebFetch"]
    assert any("not valid YAML" in n for n in reviewer["notes"])
    planner = rows["planner", str(workspace / ".github/chatmodes/planner.chatmode.md")]
    assert planner["model"] == "GPT-4.1" and planner["unmapped_tools"] == ["fetch", "usages"]
    broken = rows["broken", str(workspace / ".claude/agents/broken.md")]
    assert broken["loaded"] is False and broken["line"] == 2
    assert broken["reason"] == "'description' is required"
    shadowed = rows["code-reviewer", str(home / "agents" / "reviewer.md")]
    assert shadowed["loaded"] is False and shadowed["shadowed_by"] == reviewer["source"]
    explore = rows["explore", "built-in"]
    assert explore["loaded"] and explore["model"] == "inherit"
    assert explore["tools"] == ["read_file", "list_dir", "resolve_path", "recall"]


def test_agents_list_table_prints_data_verbatim(home: Path) -> None:
    result = cli("agents", "list", "--home", str(home))
    assert result.exit_code == 0, result.stderr
    out = plain(result.stdout)
    assert "csharp-expert" in out and "C# Expert" in out
    assert "claude-sonnet-4-5 (from sonnet)" in out
    assert "vscode/askQuestions" in out
    assert "no: 'description' is required (line 2)" in out
    assert "note: code-reviewer: tools that map to no tool of ours: WebFetch" in result.stderr


def test_doctor_reports_what_maps_to_nothing(home: Path) -> None:
    result = cli("doctor", "--home", str(home))
    out = result.stdout
    lines = [ln for ln in out.splitlines() if "agent" in ln]
    assert any(
        ln.startswith("! agent csharp-expert:")
        and "tools that map to no tool of ours: web/fetch, vscode/askQuestions" in ln
        for ln in lines
    ), out
    assert any(ln.startswith("✗ custom agent file:") and "broken.md:2" in ln for ln in lines), out
    assert any(ln.startswith("! custom agent file:") and "shadowed by" in ln for ln in lines), out
    assert any(ln.startswith("✓ custom agents: 3 loaded") for ln in lines), out


def test_config_show_prints_the_models_table(home: Path) -> None:
    (home / "config.toml").write_text(
        CONFIG + '\n[channels.notinstalled]\ntoken = "s3cret"\n', encoding="utf-8"
    )
    result = cli("config", "show", "--home", str(home))
    assert result.exit_code == 0, result.stderr
    assert 'sonnet = "claude-sonnet-4-5"' in result.stdout
    assert '"Claude Sonnet 4.6" = "claude-sonnet-4-6"' in result.stdout
    assert "s3cret" not in result.stdout  # keys no model declares stay masked


def test_a_bad_models_table_is_a_config_error(home: Path) -> None:
    (home / "config.toml").write_text('[models]\nsonnet = "Claude Sonnet"\n', encoding="utf-8")
    result = cli("agents", "list", "--home", str(home))
    assert result.exit_code == 1
    assert "'Claude Sonnet' is not a model id" in plain(result.stderr)
