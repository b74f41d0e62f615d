"""Agent files as people copy them: Copilot display names and namespaced tools, Claude
front matter that strict YAML refuses, model aliases (fixtures in tests/fixtures/agents)."""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from core.front_matter import read_front_matter
from core.providers.aliases import ModelAliases
from core.tasks.agent_files import AgentSource, file_id, load_agent_files, parse_agent
from core.tasks.agent_tools import BUILTIN_TOOLS, ToolVocabulary, map_tools
from core.tasks.catalog import AgentCatalog, home_agent_sources

FIXTURES = Path(__file__).parent.parent / "fixtures" / "agents"
CSHARP = FIXTURES / "copilot" / "csharp-expert.agent.md"
REVIEWER = FIXTURES / "claude" / "code-reviewer.md"
PLANNER = FIXTURES / "vscode" / "planner.chatmode.md"
MODELS = ModelAliases.of(
    {"sonnet": "claude-sonnet-4-5", "Claude Sonnet 4.6": "claude-sonnet-4-6", "x": "gpt-4.1"}
)


def _parse(path: Path, *servers: str, models: ModelAliases = MODELS):  # type: ignore[no-untyped-def]
    vocabulary = ToolVocabulary.of(BUILTIN_TOOLS, servers)
    return parse_agent(path.read_text(), path=path, vocabulary=vocabulary, models=models)


def test_a_display_name_keeps_the_file_name_as_id() -> None:
    spec = _parse(CSHARP)
    assert spec.name == "csharp-expert"
    assert spec.display_name == "C# Expert"
    assert spec.label == "csharp-expert (C# Expert)"
    assert spec.description.startswith("Writes and reviews modern C#")
    assert spec.instructions.startswith("# C# Expert")


async def test_the_catalog_serves_it_under_its_file_name(tmp_path: Path) -> None:
    folder = tmp_path / "ws" / ".github" / "agents"
    folder.mkdir(parents=True)
    shutil.copy(CSHARP, folder)
    catalog = AgentCatalog(sources=home_agent_sources(tmp_path / "ws", None), recheck_seconds=0)
    agents = await catalog.agents()
    assert agents["csharp-expert"].display_name == "C# Expert"
    assert catalog.problems == ()
    (listed,) = [a for a in await catalog.listing() if a.group]
    assert (listed.name, listed.display_name, listed.group) == ("csharp-expert", "C# Expert", 2)


def test_a_name_that_is_an_id_is_the_id_as_claude_code_has_it(tmp_path: Path) -> None:
    path = tmp_path / "some-file.md"
    path.write_text("---\nname: reviewer\ndescription: d\n---\n")
    spec = _parse(path)
    assert (spec.name, spec.display_name) == ("reviewer", None)


@pytest.mark.parametrize(
    ("file", "expected"),
    [
        ("C# Expert.agent.md", "C-Expert"),
        ("planner.chatmode.md", "planner"),
        ("plain.md", "plain"),
        ("x.AGENT.md", "x"),
    ],
)
def test_file_ids(file: str, expected: str) -> None:
    assert file_id(Path(file)) == expected


def test_neither_name_nor_file_name_an_id_is_a_problem(tmp_path: Path) -> None:
    folder = tmp_path / "agents"
    folder.mkdir()
    (folder / "###.md").write_text("---\nname: '!!'\ndescription: d\n---\n")
    found = load_agent_files([AgentSource(folder, "*.md")])
    (problem,) = found.problems
    assert problem.line == 2
    assert "name '!!' is not an id, and neither is the file name '###.md'" in problem.message


def test_claude_front_matter_that_strict_yaml_refuses_loads() -> None:
    front = REVIEWER.read_text().split("---")[1]
    with pytest.raises(yaml.YAMLError):
        yaml.safe_load(front)  # the fixture is the case: `: '` in an unquoted description
    spec = _parse(REVIEWER)
    assert spec.name == "code-reviewer"
    assert "the user says: 'review my last commit' or asks" in spec.description
    assert spec.tools == ("read_file", "list_dir", "resolve_path", "exec")
    assert spec.unmapped_tools == ("WebFetch",)
    assert spec.model == "claude-sonnet-4-5"
    assert spec.requested_model == "sonnet"
    assert spec.instructions.startswith("You review code.")
    assert any("not valid YAML" in note and "line 3" in note for note in spec.notes)


def test_what_the_line_reader_cannot_read_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "a.md"
    path.write_text(
        "---\n"
        "description: Checks things: 'all of them'\n"
        "tools:\n  - Read\n  - Bash\n"
        "mcp-servers:\n  github:\n    url: https://example.invalid/mcp\n"
        "argument-hint: |\n  two\n  lines\n"
        "model: 'haiku'\n"
        "---\nbody\n"
    )
    spec = _parse(path)
    assert spec.description == "Checks things: 'all of them'"
    assert spec.tools == ("read_file", "list_dir", "resolve_path", "exec")
    (_, unread) = [n for n in spec.notes if "YAML" in n or "could not read" in n][:2]
    assert unread == "could not read: mcp-servers (line 7), argument-hint (line 9)"
    # haiku is not in [models]: the parent's model, with a note saying what to add
    assert spec.model is None
    assert any("'haiku'" in n and 'haiku = "<provider model id>"' in n for n in spec.notes)


def test_unreadable_front_matter_still_fails_with_its_line(tmp_path: Path) -> None:
    front = read_front_matter("---\nname: x\ndescription: [unclosed\n---\n", lenient="lines")
    assert front.yaml_error is not None
    assert "description" not in front.data


def test_copilot_namespaced_tools_map_to_ours_and_unknown_ones_are_reported() -> None:
    spec = _parse(CSHARP, "github", "fetch")
    assert spec.tools == (
        "exec",
        "read_file",
        "list_dir",
        "resolve_path",
        "write_file",
        "edit_file",
        "mcp__fetch__*",
        "sessions_spawn",
        "subagents",
        "agents_list",
        "todo",
        "mcp__github__*",
    )
    assert spec.unmapped_tools == ("vscode/askQuestions", "ms-dotnettools.csharp/symbols")
    assert not any(t.startswith(("mcp__execute", "mcp__read", "mcp__edit")) for t in spec.tools)
    # Without those MCP servers their names map to nothing: reported, never invented.
    bare = _parse(CSHARP)
    assert "web/fetch" in bare.unmapped_tools and "github/*" in bare.unmapped_tools
    assert not any(t.startswith("mcp__") for t in bare.tools or ())
    assert any("map to no tool of ours: " in n and "web/fetch" in n for n in bare.notes)


@pytest.mark.parametrize(
    ("name", "servers", "mapped"),
    [
        ("execute/*", (), ("exec",)),
        ("runInTerminal", (), ("exec",)),
        ("shell", (), ("exec",)),
        ("Bash(git status:*)", (), ("exec",)),
        ("read/*", (), ("read_file", "list_dir", "resolve_path")),
        ("view", (), ("read_file", "list_dir", "resolve_path")),
        ("MultiEdit", (), ("write_file", "edit_file")),
        ("create", (), ("write_file", "edit_file")),
        ("Glob", (), ("list_dir",)),
        ("search/usages", (), ("list_dir",)),
        ("runSubagent", (), ("sessions_spawn", "subagents", "agents_list")),
        ("Task", (), ("sessions_spawn", "subagents", "agents_list")),
        ("TodoWrite", (), ("todo",)),
        ("WebSearch", ("brave-search", "files"), ("mcp__brave-search__*",)),
        ("WebFetch", ("brave-search", "fetch"), ("mcp__fetch__*",)),
        ("web/*", ("brave-search", "fetch"), ("mcp__brave-search__*", "mcp__fetch__*")),
        ("WebFetch", ("files",), ()),
        ("files/read_text", ("files",), ("mcp__files__read_text",)),
        ("files/*", ("files",), ("mcp__files__*",)),
        ("microsoftdocs/mcp/*", ("microsoftdocs/mcp",), ("mcp__microsoftdocs_mcp__*",)),
        ("nothere/tool", ("files",), ()),
        ("mcp__files__read_text", (), ("mcp__files__read_text",)),
        ("mcp__files", (), ("mcp__files__*",)),
        ("recall", (), ("recall",)),
        ("exec", (), ("exec",)),
        ("NotebookRead", (), ("read_file", "list_dir", "resolve_path")),
    ],
)
def test_tool_names(name: str, servers: tuple[str, ...], mapped: tuple[str, ...]) -> None:
    found = map_tools([name], ToolVocabulary.of(BUILTIN_TOOLS, servers))
    assert found.tools == mapped
    assert found.unmapped == (() if mapped else (name,))


def test_claude_names_of_tools_we_have_match_case_insensitively() -> None:
    found = map_tools(
        ["Skill", "AskUserQuestion"], ToolVocabulary.of([*BUILTIN_TOOLS, "skill"], ())
    )
    assert (found.tools, found.unmapped) == (("skill",), ("AskUserQuestion",))


def test_todo_maps_to_a_todo_tool_when_there_is_one() -> None:
    found = map_tools(["todo", "TodoWrite"], ToolVocabulary.of([*BUILTIN_TOOLS, "todo"], ()))
    assert (found.tools, found.unmapped) == (("todo",), ())


def test_star_means_every_tool_even_beside_names() -> None:
    assert map_tools(["read", "*"], ToolVocabulary()).tools is None


@pytest.mark.parametrize(
    ("asked", "model", "warned"),
    [
        ("sonnet", "claude-sonnet-4-5", False),
        ("SONNET", "claude-sonnet-4-5", False),
        ("claude  sonnet 4.6", "claude-sonnet-4-6", False),
        ("GPT-4.1", "gpt-4.1", False),  # the id [models] gives, spelt in capitals
        ("inherit", None, False),
        (None, None, False),
        ("gpt-4o-mini", "gpt-4o-mini", False),  # an id: sent as it is
        ("opus", None, True),
        ("Claude Opus 4.1", None, True),
        ("GPT-5.4 (copilot)", None, True),
        ("sonnet[1m]", None, True),
    ],
)
def test_model_names_resolve_through_the_models_table(
    asked: str | None, model: str | None, warned: bool
) -> None:
    choice = MODELS.resolve(asked)
    assert choice.model == model
    assert (choice.warning is not None) == warned


def test_a_bad_models_table_is_refused() -> None:
    with pytest.raises(ValidationError, match="same alias"):
        ModelAliases.of({"Sonnet": "a", "sonnet": "b"})
    with pytest.raises(ValidationError, match="not a model id"):
        ModelAliases.of({"sonnet": "Claude Sonnet 4.5"})


def test_vscode_chat_modes_load_from_their_folder(tmp_path: Path) -> None:
    folder = tmp_path / "ws" / ".github" / "chatmodes"
    folder.mkdir(parents=True)
    shutil.copy(PLANNER, folder)
    found = load_agent_files(home_agent_sources(tmp_path / "ws", None), models=MODELS)
    (spec,) = found.agents
    assert spec.name == "planner"
    assert spec.tools == ("list_dir",)
    assert spec.unmapped_tools == ("fetch", "usages")
    assert spec.model == "gpt-4.1"


async def test_names_that_map_to_nothing_are_logged_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    folder = tmp_path / "ws" / ".claude" / "agents"
    folder.mkdir(parents=True)
    shutil.copy(REVIEWER, folder)
    catalog = AgentCatalog(
        sources=home_agent_sources(tmp_path / "ws", None), recheck_seconds=0, models=MODELS
    )
    with caplog.at_level(logging.WARNING, logger="core.tasks.catalog"):
        await catalog.agents()
        other = folder / "other.md"
        other.write_text("---\ndescription: another\n---\n")
        stat = other.stat()
        os.utime(other, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
        agents = await catalog.agents()
    assert "other" in agents  # the files were read again
    lines = [r.getMessage() for r in caplog.records if "map to no tool of ours" in r.getMessage()]
    assert lines == [
        f"agent code-reviewer file={folder / 'code-reviewer.md'}: "
        "tools that map to no tool of ours: WebFetch"
    ]
