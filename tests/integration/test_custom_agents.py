"""A custom agent file in each format and place loads, restricts its tools and overrides
the memory share mode."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from core.tasks.tools import agents_list
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
        ["list_dir", "read_file", "recall", "resolve_path"],
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
        listed = {a["name"]: a for a in json.loads(await agents_list.run(ctx, {}))}
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
