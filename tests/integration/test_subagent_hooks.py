"""subagentStart / subagentStop hooks fire for real subagents (both file formats)."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest

from core.hooks import HooksConfig
from tests.fakes.fake_openai import ScriptItem
from tests.integration.harness import inbound
from tests.integration.hook_rig import HOOK_SCRIPT
from tests.integration.subagent_rig import last_text, only_task, rig, spawn_call
from tests.trusting import trust_workspace
from tests.waiting import eventually

PARENT = "cli:boss"


def _command(tmp: Path, mode: str) -> str:
    parts = [sys.executable, str(tmp / "hook.py"), str(tmp / "hook-log.jsonl"), mode]
    return " ".join(shlex.quote(p) for p in parts)


def _write_hooks(tmp: Path, workspace: Path, fmt: str) -> None:
    (tmp / "hook.py").write_text(HOOK_SCRIPT)
    if fmt == "copilot":
        path = workspace / ".github" / "hooks" / "sub.json"
        doc: dict[str, Any] = {
            "version": 1,
            "hooks": {
                "subagentStart": [{"bash": _command(tmp, "context"), "matcher": "general.*"}],
                "subagentStop": [{"bash": _command(tmp, "ok")}],
            },
        }
    else:
        path = workspace / ".claude" / "settings.json"
        doc = {
            "hooks": {
                "SubagentStart": [
                    {"matcher": "general-purpose", "hooks": [{"command": _command(tmp, "context")}]}
                ],
                "SubagentStop": [{"hooks": [{"command": _command(tmp, "ok")}]}],
            }
        }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))
    trust_workspace(tmp, workspace)  # the rig's home is ``tmp``


@pytest.mark.parametrize("fmt", ["copilot", "claude"])
async def test_subagent_start_context_reaches_the_child_and_stop_sees_its_answer(
    store_url: str, tmp_path: Path, fmt: str
) -> None:
    workspace = tmp_path / "ws"
    _write_hooks(tmp_path, workspace, fmt)

    def respond(session: str | None, messages: list[dict[str, Any]]) -> ScriptItem:
        if session and session.startswith("subagent:"):
            return "child says hi"
        if (result := last_text(messages)) is not None:
            return f"parent got: {result}"
        return [spawn_call("say hi")]

    async with rig(
        tmp_path, store_url, respond, hooks=HooksConfig(reload_interval=0), home=tmp_path
    ) as (
        app,
        replies,
        fake,
    ):
        message = inbound(PARENT, "delegate")
        await app.bus.publish_inbound(message)
        (reply,) = await replies.wait([message.id])
        task = await only_task(app, PARENT)
        log = tmp_path / "hook-log.jsonl"
        # subagentStop runs once the child's answer is recorded, beside the parent's turn.
        await eventually(
            lambda: log.exists() and len(log.read_text().splitlines()) >= 2,
            what="the subagentStop hook ran",
        )
    assert "child says hi" in reply.text
    systems = [
        next(m["content"] for m in body["messages"] if m["role"] == "system")
        for body in fake.requests
    ]
    child = [s for s in systems if f"- Session: {task.child_key}" in s]
    parent = [s for s in systems if s not in child]
    marker = "CTX-x" if fmt == "copilot" else "CTX-SubagentStart"
    assert child and all(marker in s for s in child)
    assert parent and not any(marker in s for s in parent)
    calls = [json.loads(line) for line in (tmp_path / "hook-log.jsonl").read_text().splitlines()]
    events = [c["payload"].get("hook_event_name") or c["mode"] for c in calls]
    assert len(calls) == 2, events
    start, stop = (c["payload"] for c in calls)
    if fmt == "copilot":
        assert start["sessionId"] == PARENT and start["agentId"] == task.child_key
        assert start["agentName"] == "general-purpose" and start["prompt"] == "say hi"
        assert stop["lastAssistantMessage"] == "child says hi"
    else:
        assert start["hook_event_name"] == "SubagentStart"
        assert start["session_id"] == PARENT and start["agent_id"] == task.child_key
        assert start["agent_type"] == "general-purpose"
        assert stop["hook_event_name"] == "SubagentStop"
        assert stop["last_assistant_message"] == "child says hi"
