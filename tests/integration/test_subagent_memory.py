"""Memory share modes: a child never writes its parent's or the global scope (refused by
the memory layer in every mode); only inherit-readonly reads the parent's memory; the
handoff is the only thing that reaches the parent's history."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from core.errors import MemoryRefused
from core.memory.service import GLOBAL, Caller
from core.tasks.handoff import HANDOFF_MARKER
from core.tools.config import ToolsConfig
from core.tools.subagents_config import SubagentsConfig
from tests.fakes.fake_openai import ScriptItem
from tests.integration.harness import inbound
from tests.integration.subagent_rig import last_text, last_user, only_task, rig, tool_results
from tests.waiting import eventually

PARENT = "test:parent"
MODES = ["isolated", "handoff", "inherit-readonly"]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("spawn_mode", ["sync", "background"])
async def test_memory_share_mode(
    store_url: str, tmp_path: Path, mode: str, spawn_mode: str
) -> None:
    parent_entry: list[int] = []

    def respond(session: str | None, messages: list[dict[str, Any]]) -> ScriptItem:
        if session and session.startswith("subagent:"):
            if last_text(messages) is not None:
                return "child results: " + json.dumps(tool_results(messages))
            return [
                ("recall", {"query": "launch code zebra"}),
                ("remember", {"text": "child wants the global scope", "scope": "global"}),
                ("forget", {"id": parent_entry[0]}),
                ("remember", {"text": "child's own note about zebras"}),
            ]
        if last_user(messages).startswith(HANDOFF_MARKER):
            return "parent read the handoff"
        if (result := last_text(messages)) is not None:
            return f"parent got: {result[:100]}"
        if last_user(messages) == "spawn":
            return [
                (
                    "sessions_spawn",
                    {"agent_type": "general-purpose", "prompt": "probe", "mode": spawn_mode},
                )
            ]
        return "parent chat"

    tools = ToolsConfig(subagents=SubagentsConfig(memory_share_mode=mode))  # type: ignore[arg-type]
    async with rig(tmp_path, store_url, respond, tools=tools) as (app, replies, _fake):
        memory = app.memory
        parent = Caller.of(PARENT)
        secret = await memory.remember(parent, "the launch code is zebra")
        parent_entry.append(secret.id)
        chat = inbound(PARENT, "hello there")  # context the inherit-readonly child may see
        await app.bus.publish_inbound(chat)
        await replies.wait([chat.id])
        message = inbound(PARENT, "spawn")
        await app.bus.publish_inbound(message)
        await replies.wait([message.id])
        task = await only_task(app, PARENT)

        async def finished() -> bool:
            found = await app.tasks.repo.get(task.id)
            return found is not None and found.status == "completed"

        await eventually(finished, what="the child finished")
        if spawn_mode == "background" and mode != "isolated":
            await eventually(
                lambda: sum(r.session_key == PARENT for r in replies.by_inbound.values()) == 3,
                what="the parent answered the handoff",
            )
        child_history = await app.sessions.all_history(task.child_key)
        parent_history = await app.sessions.all_history(PARENT)
        parent_events = [e.type for e in await app.events.list(PARENT)]
        # Aimed straight at the service (not through the tools' narrower arguments):
        child = Caller.of(
            task.child_key, depth=1, read_also=(PARENT,) if mode == "inherit-readonly" else ()
        )
        for scope in (PARENT, GLOBAL):
            with pytest.raises(MemoryRefused):
                await memory.remember(child, "sneaky", scope=scope)
        with pytest.raises(MemoryRefused):
            await memory.forget(child, secret.id)
        still_there = await memory.get(secret.id)
        global_entries = await memory.list(scope=GLOBAL)
        child_entries = await memory.list(scope=task.child_key)
        parent_entries = await memory.list(scope=PARENT)

    assert task.memory_mode == mode
    recall, remember_global, forget, remember_own = json.loads(
        child_history[-1].content.removeprefix("child results: ")
    )
    if mode == "inherit-readonly":
        assert "the launch code is zebra" in recall
    else:
        assert "zebra" not in recall.replace("launch code zebra", "")
        assert json.loads(recall) == []
    assert remember_global.startswith("error:") and "global" in remember_global
    assert forget.startswith("error:")
    assert remember_own.startswith("Remembered as #")
    assert still_there is not None
    assert global_entries == []
    assert [e.text for e in child_entries] == ["child's own note about zebras"]
    assert [e.text for e in parent_entries] == ["the launch code is zebra"]

    # The inherit-readonly child saw the parent's recent context in its prompt.
    assert ("hello there" in (task.snapshot or "")) == (mode == "inherit-readonly")

    # The parent's history: its own turns, plus the handoff (background, not isolated).
    # The sync tool result and the handoff are the only paths of the child's answer.
    texts = [m.content for m in parent_history]
    carriers = [
        m.role
        for m in parent_history
        if "child results" in m.content or m.content.startswith(HANDOFF_MARKER)
    ]
    assert carriers == (
        ["tool"] if spawn_mode == "sync" else ["user"] if mode != "isolated" else []
    )
    assert "probe" not in texts
    handoffs = [t for t in texts if t.startswith(HANDOFF_MARKER)]
    expect_handoff = spawn_mode == "background" and mode != "isolated"
    assert len(handoffs) == (1 if expect_handoff else 0)
    assert ("subagent.completed" in parent_events) == (mode != "isolated")
    assert "subagent.started" in parent_events
