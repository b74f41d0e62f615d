"""A custom agent file in each format and place loads, restricts its tools and overrides
the memory share mode."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from core.errors import ToolRetry
from core.tasks.agent_tools import BUILTIN_TOOLS
from core.tasks.tools import agents_list, sessions_spawn
from core.tools.base import ToolContext
from tests.fakes.fake_openai import ScriptItem
from tests.integration.harness import inbound
from tests.integration.subagent_rig import last_text, only_task, rig, tool_results

PARENT = "test:parent"

FORMATS = {
    "familiar": (
        "ws/agents/scout.md",
        "---\ndescription: Looks around\ntools:\n  - read_file\n  - list_dir\n"
        "memory_share_mode: isolated\n---\nLook around and report.\n",
        ["list_dir", "read_file"],
        "isolated",
    ),
    "copilot": (
        "ws/.github/agents/scout.agent.md",
        "---\nname: scout\ndescription: Looks around\ntools: ['read', 'search']\n"
        "memory_share_mode: inherit-readonly\n---\nLook around and report.\n",
        ["list_dir", "read_file", "resolve_path"],
        "inherit-readonly",
    ),
    "claude": (
        "ws/.claude/agents/looker.md",
        "---\nname: scout\ndescription: Looks around\ntools: Read, Bash\n"
        "memory_share_mode: isolated\npermissionMode: plan\n---\nLook around and report.\n",
        ["exec", "list_dir", "read_file", "resolve_path"],
        "isolated",
    ),
    "home": (
        "home/agents/scout.md",
        "---\ndescription: Looks around\ntools: Glob\nmemory_share_mode: inherit-readonly\n"
        "---\nLook around and report.\n",
        ["list_dir"],
        "inherit-readonly",
    ),
}


def _system(body: dict[str, Any]) -> str:
    return next(m["content"] for m in body["messages"] if m["role"] == "system")


@pytest.mark.parametrize("fmt", list(FORMATS))
async def test_custom_agent_file(store_url: str, tmp_path: Path, fmt: str) -> None:
    relative, text, offered, memory_mode = FORMATS[fmt]
    path = tmp_path / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)

    def respond(session: str | None, messages: list[dict[str, Any]]) -> ScriptItem:
        if session and session.startswith("subagent:"):
            if last_text(messages) is not None:
                return "scout: " + json.dumps(tool_results(messages))
            return [("write_file", {"path": "x.txt", "content": "nope"})]
        if (result := last_text(messages)) is not None:
            return f"parent got: {result}"
        return [("sessions_spawn", {"agent_type": "scout", "prompt": "look"})]

    async with rig(tmp_path, store_url, respond, home=tmp_path / "home") as (
        app,
        replies,
        fake,
    ):
        message = inbound(PARENT, "go")
        await app.bus.publish_inbound(message)
        (reply,) = await replies.wait([message.id])
        task = await only_task(app, PARENT)
        ctx = ToolContext(workspace=tmp_path / "ws", session_key=PARENT, deps=app.tool_deps)
        found = json.loads(await agents_list.run(ctx, {}))
        listed = {a["name"]: a for a in found["agents"]}
    child_bodies = [b for b in fake.requests if f"- Session: {task.child_key}" in _system(b)]
    assert task.agent_type == "scout"
    assert task.memory_mode == memory_mode
    names = sorted(t["function"]["name"] for t in child_bodies[0]["tools"])
    assert names == offered
    assert "Look around and report." in _system(child_bodies[0])
    parent_body = next(b for b in fake.requests if f"- Session: {PARENT}" in _system(b))
    assert "- scout: Looks around" in _system(parent_body)
    result = json.loads(reply.text.removeprefix("parent got: "))["result"]
    (refused,) = json.loads(result.removeprefix("scout: "))
    assert refused.startswith("error: denied:")
    assert "not among agent 'scout'" in refused
    assert not (tmp_path / "ws" / "x.txt").exists()
    assert listed["scout"]["memory_share_mode"] == memory_mode
    assert listed["scout"]["source"] == str(path)
    assert listed["explore"]["tools"] == ["read_file", "list_dir", "resolve_path", "recall"]
    assert listed["general-purpose"]["memory_share_mode"] == "handoff"


MCP_AGENTS: dict[str, tuple[str, str, list[str] | None]] = {
    # case: (file, front matter tools, MCP tools offered to the child)
    "claude-one-tool": ("ws/.claude/agents/adder.md", "tools: mcp__fake__add", ["mcp__fake__add"]),
    "claude-whole-server": (
        "ws/.claude/agents/adder.md",
        "tools: mcp__fake",
        None,  # every tool of the server: what the main agent is offered
    ),
    "copilot-server-slash-tool": (
        "ws/.github/agents/adder.agent.md",
        "tools: ['fake/add']",
        ["mcp__fake__add"],
    ),
}


@pytest.mark.parametrize("case", list(MCP_AGENTS))
async def test_custom_agent_tools_restrict_mcp_tools(tmp_path: Path, case: str) -> None:
    from core.mcp import McpConfig
    from tests.fakes.mcp_procs import stdio_server

    relative, tools_line, offered = MCP_AGENTS[case]
    path = tmp_path / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"---\nname: adder\ndescription: Adds\n{tools_line}\n---\nAdd numbers.\n")

    def respond(session: str | None, messages: list[dict[str, Any]]) -> ScriptItem:
        if session and session.startswith("subagent:"):
            if last_text(messages) is not None:
                return "adder: " + json.dumps(tool_results(messages))
            return [
                ("mcp__fake__add", {"a": 2, "b": 40}),
                ("mcp__fake__echo", {"text": "hi"}),
            ]
        if (result := last_text(messages)) is not None:
            return f"parent got: {result}"
        return [("sessions_spawn", {"agent_type": "adder", "prompt": "add"})]

    mcp = McpConfig(servers={"fake": stdio_server()})
    store_url = f"sqlite+aiosqlite:///{tmp_path / 'familiar.db'}"
    async with rig(tmp_path, store_url, respond, home=tmp_path / "home", mcp=mcp) as (
        app,
        replies,
        fake,
    ):
        await app.mcp.wait_settled(60)
        message = inbound(PARENT, "go")
        await app.bus.publish_inbound(message)
        (reply,) = await replies.wait([message.id])
        task = await only_task(app, PARENT)
    child = next(b for b in fake.requests if f"- Session: {task.child_key}" in _system(b))
    parent = next(b for b in fake.requests if f"- Session: {PARENT}" in _system(b))

    def mcp_tools(body: dict[str, Any]) -> list[str]:
        return sorted(n for t in body["tools"] if (n := t["function"]["name"]).startswith("mcp__"))

    if offered is None:
        offered = mcp_tools(parent)
        assert len(offered) > 2  # the whole server, not just the two used below
    assert mcp_tools(child) == offered
    result = json.loads(reply.text.removeprefix("parent got: "))["result"]
    added, echoed = json.loads(result.removeprefix("adder: "))
    assert added == "42"
    if "mcp__fake__echo" in offered:
        assert "hi" in echoed and not echoed.startswith("error")
    else:
        assert echoed.startswith("error: denied:") and "not among agent 'adder'" in echoed


FIXTURES = Path(__file__).parent.parent / "fixtures" / "agents"


@pytest.mark.parametrize(
    ("model_line", "asked", "sent"),
    [
        ("model: sonnet", None, "claude-sonnet-4-5"),  # an alias of [models]
        ("model: Claude Sonnet 4.6", None, "claude-sonnet-4-6"),  # a display name
        ("model: opus", None, "fake"),  # not in [models]: the parent's model
        ("model: inherit", None, "fake"),
        ("model: inherit", "SONNET", "claude-sonnet-4-5"),  # sessions_spawn's model
    ],
)
async def test_an_agent_model_reaches_the_provider_as_the_configured_id(
    tmp_path: Path,
    model_line: str,
    asked: str | None,
    sent: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    from core.providers.aliases import ModelAliases

    text = (FIXTURES / "claude" / "code-reviewer.md").read_text()
    path = tmp_path / "ws" / ".claude" / "agents" / "code-reviewer.md"
    path.parent.mkdir(parents=True)
    path.write_text(text.replace("model: sonnet", model_line))
    models = ModelAliases.of(
        {"sonnet": "claude-sonnet-4-5", "claude sonnet 4.6": "claude-sonnet-4-6"}
    )

    def respond(session: str | None, messages: list[dict[str, Any]]) -> ScriptItem:
        if session and session.startswith("subagent:"):
            return "looks fine"
        if (result := last_text(messages)) is not None:
            return f"parent got: {result}"
        spawn = {"agent_type": "code-reviewer", "prompt": "review"}
        return [("sessions_spawn", spawn if asked is None else {**spawn, "model": asked})]

    store_url = f"sqlite+aiosqlite:///{tmp_path / 'familiar.db'}"
    async with rig(tmp_path, store_url, respond, home=tmp_path / "home", models=models) as (
        app,
        replies,
        fake,
    ):
        message = inbound(PARENT, "review my last commit")
        await app.bus.publish_inbound(message)
        (reply,) = await replies.wait([message.id])
        task = await only_task(app, PARENT)
    assert "looks fine" in reply.text
    child = [b for b in fake.requests if f"- Session: {task.child_key}" in _system(b)]
    parent = [b for b in fake.requests if f"- Session: {PARENT}" in _system(b)]
    assert child and {b["model"] for b in child} == {sent}
    assert {b["model"] for b in parent} == {"fake"}
    # What `familiar agents list` and doctor map names against is what the agent has.
    # (no skill in this workspace: the `skill` tool is not offered)
    assert {t["function"]["name"] for t in parent[0]["tools"]} == BUILTIN_TOOLS - {
        "skill",
        "memory_consolidate",
    }
    warned = [
        r.getMessage() for r in caplog.records if "is an alias or display name" in r.getMessage()
    ]
    assert len(warned) == (1 if model_line == "model: opus" else 0)


async def test_agents_list_finds_agents_by_query(tmp_path: Path) -> None:
    folder = tmp_path / "ws" / ".github" / "agents"
    folder.mkdir(parents=True)
    for n in range(60):
        (folder / f"helper-{n:02d}.agent.md").write_text(
            f"---\nname: Helper {n}\ndescription: Generic helper number {n}\n---\nHelp.\n"
        )
    (folder / "csharp-expert.agent.md").write_text(
        (FIXTURES / "copilot" / "csharp-expert.agent.md").read_text()
    )

    def respond(session: str | None, messages: list[dict[str, Any]]) -> ScriptItem:
        return "ok"

    store_url = f"sqlite+aiosqlite:///{tmp_path / 'familiar.db'}"
    async with rig(tmp_path, store_url, respond, home=tmp_path / "home") as (app, _replies, _fake):
        ctx = ToolContext(workspace=tmp_path / "ws", session_key=PARENT, deps=app.tool_deps)
        everything = json.loads(await agents_list.run(ctx, {}))
        found = json.loads(await agents_list.run(ctx, {"query": "LINQ and nullable types in .NET"}))
    assert everything["total"] == 68
    assert len(everything["agents"]) == 30 and "38 more" in everything["more"]
    names = [a["name"] for a in found["agents"]]
    assert names == [
        "general-purpose",
        "explore",
        "task",
        "rubber-duck",
        "code-review",
        "research",
        "rem-agent",
        "csharp-expert",
    ]
    assert found["agents"][7]["display_name"] == "C# Expert"


async def test_a_peer_without_group_mode_is_a_clear_refusal_and_none_is_listed(
    tmp_path: Path,
) -> None:
    def respond(session: str | None, messages: list[dict[str, Any]]) -> ScriptItem:
        return "ok"

    store_url = f"sqlite+aiosqlite:///{tmp_path / 'familiar.db'}"
    async with rig(tmp_path, store_url, respond) as (app, _replies, _fake):
        ctx = ToolContext(workspace=tmp_path / "ws", session_key=PARENT, deps=app.tool_deps)
        listed = json.loads(await agents_list.run(ctx, {}))
        with pytest.raises(ToolRetry, match="group mode is off here, so there are no peers"):
            await sessions_spawn.run(ctx, {"agent_type": "peer:work", "prompt": "hello"})
        records = await app.tasks.repo.list()
    assert not [a for a in listed["agents"] if a["name"].startswith("peer:")]
    assert records == []
