"""The system prompt's ``## Agents`` section costs the same with 400 agents as with 20,
and lists the ones the message is about."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

from core.agent.agents_section import AgentListing, agents_section, rank
from core.agent.context import ContextBuilder, ContextConfig
from core.tasks.catalog import AgentCatalog, home_agent_sources

TOPICS = [
    "python",
    "rust",
    "golang",
    "kotlin",
    "swift",
    "postgres",
    "kubernetes",
    "terraform",
    "react",
    "security",
]
KINDS = ["reviewer", "tester", "architect", "migrator", "profiler", "documenter", "debugger"]


def _write_agents(folder: Path, count: int) -> None:
    """``count`` Copilot agent files, display names and all, as a big catalog has them."""
    folder.mkdir(parents=True, exist_ok=True)
    for n in range(count):
        topic, kind = TOPICS[n % len(TOPICS)], KINDS[(n // len(TOPICS)) % len(KINDS)]
        (folder / f"{topic}-{kind}-{n:03d}.agent.md").write_text(
            "---\n"
            f"name: '{topic.title()} {kind.title()} #{n}'\n"
            f"description: 'A {kind} for {topic} projects: reads code, explains findings.'\n"
            "tools: ['read', 'search', 'execute/runInTerminal']\n"
            "---\n"
            f"You are a {kind} for {topic}.\n"
        )
    # The one the test looks for: alphabetically last, so only relevance lists it.
    (folder / "zz-azure-bicep.agent.md").write_text(
        "---\nname: Azure Bicep Author\n"
        "description: Writes Azure Bicep templates and deploys them with az deployment.\n"
        "---\nWrite Bicep.\n"
    )


async def _section(tmp_path: Path, count: int, message: str) -> str:
    workspace = tmp_path / f"ws{count}"
    _write_agents(workspace / ".github" / "agents", count)
    catalog = AgentCatalog(sources=home_agent_sources(workspace, None))
    builder = ContextBuilder(
        workspace=workspace,
        config=ContextConfig(),
        clock=lambda: datetime(2026, 1, 1, tzinfo=UTC),
    )
    prompt = await builder.system_prompt(
        session_key="cli:x",
        channel="cli",
        tools=[],
        agents=await catalog.listing(),
        agents_query=message,
    )
    return "## Agents" + prompt.split("## Agents", 1)[1]


async def test_400_agents_cost_about_what_20_do(tmp_path: Path) -> None:
    budget = ContextConfig().agents_max_chars
    message = "Please write an Azure Bicep template for the storage account"
    small = await _section(tmp_path, 19, message)
    big = await _section(tmp_path, 399, message)
    assert len(big) <= budget
    assert len(small) <= budget
    assert len(big) < 1.5 * len(small)
    # The built-in agents first, then the one the message is about.
    lines = [ln for ln in big.splitlines() if ln.startswith("- ")]
    assert [ln.split(":")[0] for ln in lines[:7]] == [
        "- general-purpose",
        "- explore",
        "- task",
        "- rubber-duck",
        "- code-review",
        "- research",
        "- rem-agent",
    ]
    assert lines[7].startswith("- zz-azure-bicep (Azure Bicep Author): Writes Azure Bicep")
    listed = len(lines) - 7
    more = re.search(r"…and (\d+) more: call `agents_list` with a `query`", big)
    assert more is not None and int(more.group(1)) + listed == 400
    # Twenty fit whole.
    assert "more: call" not in small and small.count("\n- ") == 27


async def test_without_a_match_custom_agents_are_alphabetical(tmp_path: Path) -> None:
    section = await _section(tmp_path, 30, "hello there")
    custom = [ln for ln in section.splitlines() if ln.startswith("- ")][7:]
    ids = [ln[2:].split(" ", 1)[0] for ln in custom]
    assert ids == sorted(ids)


def test_rank_prefers_rarer_words_and_names() -> None:
    listing = [
        AgentListing("explore", "built in", group=0),
        AgentListing("py-docs", "Writes docs for python code", group=1),
        AgentListing("py-tests", "Writes tests for python code", group=1),
        AgentListing("pytest-fixer", "Fixes failing pytest tests in python code", group=2),
    ]
    ranked = [a.name for a, score in rank(listing, "my pytest tests fail") if score > 0]
    assert ranked == ["pytest-fixer", "py-tests"]
    assert [a.name for a, _ in rank(listing, None)] == ["py-docs", "py-tests", "pytest-fixer"]


def test_the_budget_holds_for_long_descriptions() -> None:
    listing = [AgentListing(f"a{n}", "word " * 500, group=1) for n in range(50)]
    section = agents_section(listing, query=None, max_chars=1000)
    assert len(section) <= 1000
    assert section.endswith("to find the right one.")
    assert all(len(line) < 200 for line in section.splitlines())
