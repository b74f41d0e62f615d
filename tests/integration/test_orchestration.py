"""The orchestration commands end to end with a scripted model on the real fake OpenAI
server: /review, /research, /autopilot and /help."""

from __future__ import annotations

import asyncio
import json
import re
import time
from pathlib import Path
from typing import Any

from core.orchestration.commands import RESEARCH_TOOLS
from core.tasks.handoff import HANDOFF_MARKER
from core.tasks.tools import agents_list
from core.tools.base import ToolContext
from tests.fakes.fake_openai import ScriptItem
from tests.integration.harness import inbound
from tests.integration.subagent_rig import (
    last_text,
    last_user,
    only_task,
    rig,
    spawn_call,
    tool_results,
)

MAIN = "test:orchestrate"


def _tools_offered(body: dict[str, Any]) -> set[str]:
    return {t["function"]["name"] for t in body.get("tools") or []}


def _session_of(body: dict[str, Any]) -> str | None:
    system = next((m for m in body["messages"] if m.get("role") == "system"), {})
    found = re.search(r"^- Session: (\S+)$", str(system.get("content") or ""), re.MULTILINE)
    return found.group(1) if found else None


async def _types(app: Any, key: str) -> list[str]:
    return [e.type for e in await app.events.list(key)]


async def test_help_lists_the_five_orchestration_commands(store_url: str, tmp_path: Path) -> None:
    async with rig(tmp_path, store_url, lambda _s, _m: "unused") as (app, replies, fake):
        message = inbound(MAIN, "/help")
        await app.bus.publish_inbound(message)
        (reply,) = await replies.wait([message.id])
    for usage in (
        "/review [WHAT]",
        "/research TOPIC",
        "/fleet GOAL",
        "/autopilot [on|off]",
        "/subconscious run",
    ):
        assert usage in reply.text
    assert fake.log == []  # handled before the model


async def test_review_spawns_code_review_and_returns_its_findings(
    store_url: str, tmp_path: Path
) -> None:
    (tmp_path / "ws" / ".git").mkdir(parents=True)
    finding = "app.py:3: divides by zero when count is 0; guard it"

    def respond(session: str | None, messages: list[dict[str, Any]]) -> ScriptItem:
        if session and session.startswith("subagent:"):
            return f"1 finding:\n{finding}"
        if (result := last_text(messages)) is not None:
            return "Review findings:\n" + json.loads(result)["result"]
        asked = re.search(r'agent_type "([a-z-]+)"', last_user(messages))
        assert asked is not None, "the /review prompt names the agent type"
        return [("sessions_spawn", {"agent_type": asked.group(1), "prompt": "review the diff"})]

    async with rig(tmp_path, store_url, respond) as (app, replies, fake):
        message = inbound(MAIN, "/review")
        await app.bus.publish_inbound(message)
        (reply,) = await replies.wait([message.id])
        task = await only_task(app, MAIN)
        types = await _types(app, MAIN)
    assert task.agent_type == "code-review" and task.status == "completed"
    assert reply.kind == "reply" and finding in reply.text
    child = next(b for b in fake.requests if _session_of(b) == task.child_key)
    assert _tools_offered(child) <= {"exec", "read_file", "list_dir", "resolve_path", "recall"}
    assert "never comment on style" in child["messages"][0]["content"].lower()
    assert "uncommitted changes" in fake.requests[0]["messages"][-1]["content"]
    assert types.index("orchestration.started") < types.index("subagent.started")


async def test_review_without_target_outside_git_is_a_usage_error(
    store_url: str, tmp_path: Path
) -> None:
    async with rig(tmp_path, store_url, lambda _s, _m: "unused") as (app, replies, fake):
        message = inbound(MAIN, "/review")
        await app.bus.publish_inbound(message)
        (reply,) = await replies.wait([message.id])
        tasks = await app.tasks.repo.list(owner_key=MAIN)
    assert reply.kind == "error" and "usage: /review" in reply.text
    assert fake.log == [] and tasks == []


async def test_research_runs_parallel_children_writes_the_report_and_keeps_to_its_tools(
    store_url: str, tmp_path: Path
) -> None:
    topics = ("sqlite wal", "postgres skip locked", "leases")
    started: list[float] = []
    finished: list[float] = []
    all_started = asyncio.Event()

    async def respond(session: str | None, messages: list[dict[str, Any]]) -> ScriptItem:
        if session and session.startswith("subagent:"):
            started.append(time.monotonic())
            if len(started) >= len(topics):
                all_started.set()
            # Only answers once every child is running: children run one after another
            # would never get here (the test times out).
            await asyncio.wait_for(all_started.wait(), timeout=20)
            finished.append(time.monotonic())
            thread = last_user(messages).split(":", 1)[-1].strip()
            return f"finding on {thread} (source: docs/{thread.replace(' ', '_')}.md)"
        prompt = next(m["content"] for m in messages if m.get("role") == "user")
        report = re.search(r"`(research/[a-z0-9-]+\.md)`", prompt)
        assert report is not None
        steps = sum(1 for m in messages if m.get("role") == "assistant")
        if steps == 0:  # tries a tool outside the allowed list first
            return [("exec", {"command": "touch pwned"})]
        if steps == 1:
            return [
                ("sessions_spawn", {"agent_type": "research", "prompt": f"Investigate: {t}"})
                for t in topics
            ]
        if steps == 2:
            found = [json.loads(r)["result"] for r in tool_results(messages)]
            body = "# Report\n\n" + "\n".join(f"- {f}" for f in found)
            return [("write_file", {"path": report.group(1), "content": body})]
        if steps == 3:
            return [("task_complete", {"summary": f"Report written to {report.group(1)}"})]
        return "done"

    async with rig(tmp_path, store_url, respond) as (app, replies, fake):
        message = inbound(MAIN, "/research SQLite vs Postgres for queues")
        await app.bus.publish_inbound(message)
        (reply,) = await replies.wait([message.id])
        tasks = await app.tasks.repo.list(owner_key=MAIN)
        events = await app.events.list(MAIN)
    report = tmp_path / "ws" / "research" / "sqlite-vs-postgres-for-queues.md"
    assert report.is_file()
    text = report.read_text()
    for topic in topics:
        assert f"finding on {topic}" in text
    assert "research/sqlite-vs-postgres-for-queues.md" in reply.text
    assert len(tasks) == 3 and {t.agent_type for t in tasks} == {"research"}
    assert all(t.status == "completed" for t in tasks)
    assert max(started) < min(finished)  # every child ran while the others ran
    # The main agent was offered only the allowed tools, and its exec call was refused.
    main_bodies = [b for b in fake.requests if _session_of(b) == MAIN]
    assert all(_tools_offered(b) <= set(RESEARCH_TOOLS) for b in main_bodies)
    ran = [e.data for e in events if e.type == "tool.execution_complete"]
    assert [(d.tool, d.is_error) for d in ran if d.tool == "exec"] == [("exec", True)]  # type: ignore[union-attr]
    assert all(d.tool in RESEARCH_TOOLS for d in ran if not d.is_error)  # type: ignore[union-attr]
    assert not (tmp_path / "ws" / "pwned").exists()
    types = [e.type for e in events]
    assert "orchestration.started" in types and "session.task_complete" in types


async def test_autopilot_on_makes_a_plain_message_continue_until_task_complete(
    store_url: str, tmp_path: Path
) -> None:
    def respond(session: str | None, messages: list[dict[str, Any]]) -> ScriptItem:
        asked = max(
            i for i, m in enumerate(messages) if m.get("content") in ("plain", "do the task")
        )
        steps = sum(1 for m in messages[asked:] if m.get("role") == "assistant")
        if last_user(messages) == "plain":
            return "one answer"
        if steps < 2:
            return f"working, step {steps + 1}"
        return [("task_complete", {"summary": "all done"})]

    async with rig(tmp_path, store_url, respond) as (app, replies, fake):
        before = inbound(MAIN, "plain")
        await app.bus.publish_inbound(before)
        await replies.wait([before.id])
        calls_before = len(fake.log)
        on = inbound(MAIN, "/autopilot on")
        work = inbound(MAIN, "do the task")
        for m in (on, work):
            await app.bus.publish_inbound(m)
        on_reply, work_reply = await replies.wait([on.id, work.id])
        # /status overtakes queued messages, so it is asked once autopilot is on.
        status = inbound(MAIN, "/status")
        await app.bus.publish_inbound(status)
        (status_reply,) = await replies.wait([status.id])
        off = inbound(MAIN, "/autopilot off")
        await app.bus.publish_inbound(off)
        await replies.wait([off.id])
        after = inbound(MAIN, "plain")
        await app.bus.publish_inbound(after)
        await replies.wait([after.id])
        types = await app.events.list(MAIN)
    assert calls_before == 1
    assert "Autopilot on" in on_reply.text
    assert "autopilot on" in status_reply.text
    # three LLM calls for the one message: two answers nudged on, then task_complete
    assert len(fake.log) == calls_before + 3 + 1
    assert work_reply.text == "all done"
    work_types = [e.type for e in types if e.message_id == work.id]
    assert work_types.count("assistant.turn_start") == 3
    assert "session.task_complete" in work_types
    modes = [e.data for e in types if e.type == "session.mode_changed"]
    assert [(d.mode, d.enabled) for d in modes] == [("autopilot", True), ("autopilot", False)]  # type: ignore[union-attr]


async def test_agents_list_shows_the_orchestration_agents_with_their_tools(
    store_url: str, tmp_path: Path
) -> None:
    async with rig(tmp_path, store_url, lambda _s, _m: "unused") as (app, _replies, _fake):
        ctx = ToolContext(workspace=tmp_path / "ws", session_key=MAIN, deps=app.tool_deps)
        listed = json.loads(await agents_list.run(ctx, {}))
    tools = {a["name"]: a["tools"] for a in listed["agents"]}
    assert tools["code-review"] == ["exec", "read_file", "list_dir", "resolve_path", "recall"]
    assert tools["research"] == [
        "exec",
        "read_file",
        "list_dir",
        "resolve_path",
        "recall",
        "mcp__*",
    ]
    assert tools["rem-agent"] == ["memory_consolidate"]


async def test_an_autopilot_message_waits_for_its_background_agents(
    store_url: str, tmp_path: Path
) -> None:
    release = asyncio.Event()

    async def respond(session: str | None, messages: list[dict[str, Any]]) -> ScriptItem:
        if session and session.startswith("subagent:"):
            await release.wait()
            return "the child's result"
        last = str(messages[-1].get("content"))
        if last == "go":
            return [spawn_call("slow work", mode="background")]
        if "reported back" in last and "the child's result" in last:
            return [("task_complete", {"summary": "used the child's result"})]
        if messages[-1].get("role") == "tool":
            release.set()  # the child may answer only once the parent's run would end
            return "started it; waiting"
        return "nudged"

    async with rig(tmp_path, store_url, respond) as (app, replies, fake):
        message = inbound(MAIN, "go", autopilot=True)
        await app.bus.publish_inbound(message)
        (reply,) = await replies.wait([message.id])
        task = await only_task(app, MAIN)
        history = await app.sessions.all_history(MAIN)
        main_calls = [e for e in fake.log if e["session"] == MAIN]
        main_replies = [r for r in replies.by_inbound.values() if r.session_key == MAIN]
    assert task.status == "completed" and task.mode == "background" and not task.handoff
    assert len(main_calls) == 3 and "nudged" not in reply.text
    assert any("the child's result" in m.content for m in history if m.role == "user")
    assert not any(m.content.startswith(HANDOFF_MARKER) for m in history)
    assert len(main_replies) == 1  # no handoff turn after the message
