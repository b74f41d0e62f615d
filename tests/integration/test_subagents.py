"""Subagents end to end on a real store and a real OpenAI-compatible fake: sync,
background, multi-turn, recursive cancel and the depth and concurrency caps."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from core.agent.config import AgentConfig
from core.tasks.handoff import HANDOFF_MARKER
from core.tasks.records import TaskRecord
from core.tools.config import PolicyRule, ToolPolicyConfig, ToolsConfig
from core.tools.subagents_config import SubagentsConfig
from tests.fakes.fake_openai import ScriptItem, Stall
from tests.integration.harness import inbound
from tests.integration.subagent_rig import (
    last_text,
    last_user,
    loads,
    only_task,
    rig,
    spawn_call,
    tool_results,
)
from tests.waiting import eventually

PARENT = "test:parent"


def _child_echo(messages: list[dict[str, Any]]) -> str:
    return f"child did: {last_user(messages)}"


async def _event_types(app: Any, key: str) -> list[str]:
    return [e.type for e in await app.events.list(key)]


async def test_sync_spawn_returns_the_childs_answer_in_the_same_tool_call(
    store_url: str, tmp_path: Path
) -> None:
    def respond(session: str | None, messages: list[dict[str, Any]]) -> ScriptItem:
        if session and session.startswith("subagent:"):
            return _child_echo(messages)
        if (result := last_text(messages)) is not None:
            return f"parent got: {result}"
        return [spawn_call("count the files", description="counting", model="small-model")]

    async with rig(tmp_path, store_url, respond) as (app, replies, fake):
        message = inbound(PARENT, "go")
        await app.bus.publish_inbound(message)
        (reply,) = await replies.wait([message.id])
        task = await only_task(app, PARENT)
        parent_events = await _event_types(app, PARENT)
    assert reply.text.startswith("parent got: ")
    result = loads(reply.text.removeprefix("parent got: "))
    assert result == {
        "agent_id": task.id,
        "agent_type": "general-purpose",
        "name": None,
        "status": "completed",
        "result": "child did: count the files",
    }
    # Three LLM calls: the parent's spawn, the child, the parent's answer with the result.
    assert [e["session"] for e in fake.log] == [PARENT, task.child_key, PARENT]
    assert task.status == "completed" and task.turns == 1 and task.depth == 1
    assert task.description == "counting"
    assert task.model == "small-model"
    assert [b["model"] for b in fake.requests] == ["fake", "small-model", "fake"]
    assert "subagent.started" in parent_events
    assert parent_events.index("subagent.started") < parent_events.index("session.idle")


async def test_background_spawn_answers_at_once_and_hands_off_on_completion(
    store_url: str, tmp_path: Path
) -> None:
    release = asyncio.Event()

    async def respond(session: str | None, messages: list[dict[str, Any]]) -> ScriptItem:
        if session and session.startswith("subagent:"):
            await release.wait()
            return _child_echo(messages)
        user = last_user(messages)
        if user.startswith(HANDOFF_MARKER):
            return "parent read the handoff"
        if (result := last_text(messages)) is not None:
            return f"parent got: {result}"
        return [spawn_call("long job", mode="background")]

    async with rig(tmp_path, store_url, respond) as (app, replies, _fake):
        message = inbound(PARENT, "go")
        await app.bus.publish_inbound(message)
        (first,) = await replies.wait([message.id])
        task = await only_task(app, PARENT)
        assert task.status == "running"  # the parent answered while the child works
        release.set()

        def parent_replies() -> list[str]:
            return [r.text for r in replies.by_inbound.values() if r.session_key == PARENT]

        await eventually(lambda: len(parent_replies()) == 2, what="the handoff answered")
        history = await app.sessions.all_history(PARENT)
        done = await app.tasks.repo.get(task.id)
        events = await _event_types(app, PARENT)
    assert loads(first.text.removeprefix("parent got: ")) == {
        "agent_id": task.id,
        "agent_type": "general-purpose",
        "status": "running",
    }
    assert parent_replies()[1] == "parent read the handoff"
    handoffs = [m for m in history if m.role == "user" and m.content.startswith(HANDOFF_MARKER)]
    assert len(handoffs) == 1
    assert '"result": "child did: long job"' in handoffs[0].content
    assert f'"agent_id": "{task.id}"' in handoffs[0].content
    assert done is not None and done.status == "completed" and done.result == "child did: long job"
    assert events.count("subagent.completed") == 1


async def test_multi_turn_agent_goes_idle_and_answers_a_send(
    store_url: str, tmp_path: Path
) -> None:
    def respond(session: str | None, messages: list[dict[str, Any]]) -> ScriptItem:
        if session and session.startswith("subagent:"):
            users = [m for m in messages if m.get("role") == "user"]
            return f"child turn {len(users)}: {last_user(messages)}"
        if (result := last_text(messages)) is not None:
            return f"parent got: {result}"
        if last_user(messages) == "again":
            return [
                (
                    "subagents",
                    {"action": "send", "agent_id": "helper", "message": "second", "wait": True},
                )
            ]
        return [spawn_call("first", name="helper")]

    async with rig(tmp_path, store_url, respond) as (app, replies, _fake):
        one = inbound(PARENT, "go")
        await app.bus.publish_inbound(one)
        (first,) = await replies.wait([one.id])
        idle = await only_task(app, PARENT)
        two = inbound(PARENT, "again")
        await app.bus.publish_inbound(two)
        (second,) = await replies.wait([two.id])
        after = await only_task(app, PARENT)
        child_history = await app.sessions.all_history(idle.child_key)
    assert loads(first.text.removeprefix("parent got: "))["status"] == "idle"
    assert idle.status == "idle" and idle.multi_turn and idle.name == "helper"
    answer = loads(second.text.removeprefix("parent got: "))
    # The second turn saw the first: the child keeps its own conversation.
    assert answer["result"] == "child turn 2: second"
    assert answer["status"] == "idle"
    assert after.status == "idle" and after.turns == 2
    assert [m.content for m in child_history if m.role == "user"] == ["first", "second"]


async def test_cancel_is_recursive_and_stops_the_running_grandchild(
    store_url: str, tmp_path: Path
) -> None:
    def respond(session: str | None, messages: list[dict[str, Any]]) -> ScriptItem:
        if session and session.startswith("subagent:"):
            if last_user(messages) == "delegate":
                if (result := last_text(messages)) is not None:
                    return f"A got: {result}"
                return [spawn_call("hang")]
            return Stall()
        if (result := last_text(messages)) is not None:
            return f"parent got: {result}"
        return [spawn_call("delegate", mode="background")]

    async with rig(tmp_path, store_url, respond) as (app, replies, _fake):
        message = inbound(PARENT, "go")
        await app.bus.publish_inbound(message)
        await replies.wait([message.id])
        a = await only_task(app, PARENT)

        async def grandchild_running() -> bool:
            found = await app.tasks.repo.list(owner_key=a.child_key)
            return bool(found) and found[0].status == "running"

        await eventually(grandchild_running, what="A started B")
        b = await only_task(app, a.child_key)
        cancelled = await app.tasks.cancel(a.id)

        async def both_turns_stopped() -> bool:
            states = await app.bus.message_states([a.message_id or "", b.message_id or ""])
            # Settled either way: "Stopped.", or an error when the stop hit an LLM call.
            return len(states) == 2 and set(states.values()) <= {"done", "failed"}

        await eventually(both_turns_stopped, what="A's and B's turns were stopped")
        a_after = await app.tasks.repo.get(a.id)
        b_after = await app.tasks.repo.get(b.id)
        parent_events = await app.events.list(PARENT)
        a_events = await _event_types(app, a.child_key)
        again = await app.tasks.cancel(a.id)
        history = await app.sessions.all_history(PARENT)
    assert [t.id for t in cancelled] == [a.id, b.id]
    assert a_after is not None and a_after.status == "cancelled"
    assert b_after is not None and b_after.status == "cancelled" and b_after.depth == 2
    failed = [e for e in parent_events if e.type == "subagent.failed"]
    assert len(failed) == 1 and getattr(failed[0].data, "status", None) == "cancelled"
    assert "subagent.failed" in a_events
    assert again == []
    assert not any(m.content.startswith(HANDOFF_MARKER) for m in history)


async def test_depth_cap_is_a_clear_tool_error(store_url: str, tmp_path: Path) -> None:
    def respond(session: str | None, messages: list[dict[str, Any]]) -> ScriptItem:
        if (result := last_text(messages)) is not None:
            who = "child" if session and session.startswith("subagent:") else "parent"
            return f"{who} got: {result}"
        return [spawn_call("go deeper")]

    tools = ToolsConfig(subagents=SubagentsConfig(max_depth=1))
    async with rig(tmp_path, store_url, respond, tools=tools) as (app, replies, _fake):
        message = inbound(PARENT, "go")
        await app.bus.publish_inbound(message)
        (reply,) = await replies.wait([message.id])
        child = await only_task(app, PARENT)
        grandchildren = await app.tasks.repo.list(owner_key=child.child_key)
    result = loads(reply.text.removeprefix("parent got: "))
    assert result["status"] == "completed"
    assert result["result"].startswith("child got: error: subagents may nest at most 1 levels")
    assert "tools.subagents.max_depth" in result["result"]
    assert grandchildren == []


async def test_concurrency_cap_refuses_the_spawn_beyond_it(store_url: str, tmp_path: Path) -> None:
    release = asyncio.Event()

    async def respond(session: str | None, messages: list[dict[str, Any]]) -> ScriptItem:
        if session and session.startswith("subagent:"):
            await release.wait()
            return _child_echo(messages)
        if last_user(messages).startswith(HANDOFF_MARKER):
            return "noted"
        if last_text(messages) is not None:
            return "parent got: " + json.dumps(tool_results(messages))
        return [spawn_call("one", mode="background"), spawn_call("two", mode="background")]

    tools = ToolsConfig(subagents=SubagentsConfig(max_concurrent=1))
    async with rig(tmp_path, store_url, respond, tools=tools) as (app, replies, _fake):
        message = inbound(PARENT, "go")
        await app.bus.publish_inbound(message)
        (reply,) = await replies.wait([message.id])
        started = await app.tasks.repo.list(owner_key=PARENT)
        release.set()
    results = json.loads(reply.text.removeprefix("parent got: "))
    assert len(started) == 1
    refused = [r for r in results if r.startswith("error:")]
    assert len(refused) == 1 and "tools.subagents.max_concurrent" in refused[0]
    accepted = [json.loads(r) for r in results if not r.startswith("error:")]
    assert accepted == [
        {"agent_id": started[0].id, "agent_type": "general-purpose", "status": "running"}
    ]


async def test_unknown_agent_type_lists_the_valid_ones(store_url: str, tmp_path: Path) -> None:
    def respond(session: str | None, messages: list[dict[str, Any]]) -> ScriptItem:
        if (result := last_text(messages)) is not None:
            return f"parent got: {result}"
        return [("sessions_spawn", {"agent_type": "wizard", "prompt": "x"})]

    async with rig(tmp_path, store_url, respond) as (app, replies, _fake):
        message = inbound(PARENT, "go")
        await app.bus.publish_inbound(message)
        (reply,) = await replies.wait([message.id])
        started = await app.tasks.repo.list(owner_key=PARENT)
    assert "unknown agent_type 'wizard'" in reply.text
    for name in ("general-purpose", "explore", "task", "rubber-duck"):
        assert name in reply.text
    assert started == []


async def test_tasks_slash_command_lists_and_cancels(store_url: str, tmp_path: Path) -> None:
    def respond(session: str | None, messages: list[dict[str, Any]]) -> ScriptItem:
        if session and session.startswith("subagent:"):
            return Stall()
        if (result := last_text(messages)) is not None:
            return f"parent got: {result}"
        return [spawn_call("wait forever", mode="background", description="waiting")]

    async with rig(tmp_path, store_url, respond) as (app, replies, _fake):
        message = inbound(PARENT, "go")
        await app.bus.publish_inbound(message)
        await replies.wait([message.id])
        task = await only_task(app, PARENT)
        listing = inbound(PARENT, "/tasks")
        other = inbound("test:other", "/tasks")
        for m in (listing, other):
            await app.bus.publish_inbound(m)
        listed, nothing = await replies.wait([listing.id, other.id])
        cancel = inbound(PARENT, f"/tasks cancel {task.id}")
        await app.bus.publish_inbound(cancel)
        (cancelled,) = await replies.wait([cancel.id])
        after = await app.tasks.repo.get(task.id)
    assert task.id in listed.text and "running" in listed.text and "waiting" in listed.text
    assert nothing.text == "No subagents in this session."
    assert cancelled.text == f"Cancelled {task.id}."
    assert after is not None and after.status == "cancelled"


async def test_start_context_reaches_the_childs_prompt_once_per_agent(
    store_url: str, tmp_path: Path
) -> None:
    asked: list[str] = []

    class Extra:
        async def start_context(self, task: TaskRecord) -> list[str]:
            asked.append(task.id)
            return [f"## From a hook\n\nextra context for {task.agent_type}"]

    def respond(session: str | None, messages: list[dict[str, Any]]) -> ScriptItem:
        if session and session.startswith("subagent:"):
            return _child_echo(messages)
        if (result := last_text(messages)) is not None:
            return f"parent got: {result}"
        return [spawn_call("one", name="keeper")]

    async with rig(tmp_path, store_url, respond) as (app, replies, fake):
        app.tasks.add_start_context(Extra())
        message = inbound(PARENT, "go")
        await app.bus.publish_inbound(message)
        await replies.wait([message.id])
        task = await only_task(app, PARENT)
        await app.tasks.send(PARENT, "keeper", "two", wait=True)
        await app.tasks.wait(await only_task(app, PARENT))
    systems = [
        next(m["content"] for m in body["messages"] if m["role"] == "system")
        for body in fake.requests
    ]
    child_systems = [s for s in systems if f"- Session: {task.child_key}" in s]
    assert len(child_systems) == 2
    assert all("extra context for general-purpose" in s for s in child_systems)
    assert not any("extra context" in s for s in systems if s not in child_systems)
    assert asked == [task.id]


async def test_a_sync_spawn_that_outlasts_its_wait_becomes_a_handoff(
    store_url: str, tmp_path: Path
) -> None:
    release = asyncio.Event()

    async def respond(session: str | None, messages: list[dict[str, Any]]) -> ScriptItem:
        if session and session.startswith("subagent:"):
            await release.wait()
            return _child_echo(messages)
        if last_user(messages).startswith(HANDOFF_MARKER):
            return "parent read the late handoff"
        if (result := last_text(messages)) is not None:
            return f"parent got: {result}"
        return [spawn_call("slow job")]

    tools = ToolsConfig(subagents=SubagentsConfig(sync_timeout=0.5))
    async with rig(tmp_path, store_url, respond, tools=tools) as (app, replies, _fake):
        message = inbound(PARENT, "go")
        await app.bus.publish_inbound(message)
        (first,) = await replies.wait([message.id])
        release.set()
        await eventually(
            lambda: sum(r.session_key == PARENT for r in replies.by_inbound.values()) == 2,
            what="the late result arrived as a handoff",
        )
        task = await only_task(app, PARENT)
    early = loads(first.text.removeprefix("parent got: "))
    assert early["status"] == "running" and early["agent_id"] == task.id
    assert "handoff" in early["note"]
    assert task.status == "completed" and task.result == "child did: slow job"


async def test_parallel_sync_spawns_lend_the_only_slot_until_the_last_returns(
    store_url: str, tmp_path: Path
) -> None:
    """One slot: three sync children of one response run while the parent waits; the
    parent takes its slot back only when the last of the three calls returns."""

    def respond(session: str | None, messages: list[dict[str, Any]]) -> ScriptItem:
        if session and session.startswith("subagent:"):
            return _child_echo(messages)
        if last_text(messages) is not None:
            return "parent got: " + json.dumps(tool_results(messages))
        return [spawn_call(f"part {i}") for i in range(3)]

    agent = AgentConfig(max_concurrent_sessions=1)
    async with rig(tmp_path, store_url, respond, agent=agent) as (app, replies, _fake):
        message = inbound(PARENT, "go")
        await app.bus.publish_inbound(message)
        (reply,) = await replies.wait([message.id], timeout=60)
        assert app.runtime.slots_in_use == 0
    results = [json.loads(r)["result"] for r in json.loads(reply.text.removeprefix("parent got: "))]
    assert results == ["child did: part 0", "child did: part 1", "child did: part 2"]


async def test_children_get_the_policy_of_their_agent_type_and_depth(
    store_url: str, tmp_path: Path
) -> None:
    def respond(session: str | None, messages: list[dict[str, Any]]) -> ScriptItem:
        if session and session.startswith("subagent:"):
            return _child_echo(messages)
        if last_text(messages) is not None:
            return "parent done"
        return [
            ("sessions_spawn", {"agent_type": "explore", "prompt": "look"}),
            ("sessions_spawn", {"agent_type": "general-purpose", "prompt": "work"}),
        ]

    policy = ToolPolicyConfig(
        per_agent={"explore": PolicyRule(deny=["list_dir"])},
        subagent_deny=["write_file", "manage_schedule"],
    )
    tools = ToolsConfig(policy=policy)
    async with rig(tmp_path, store_url, respond, tools=tools) as (app, replies, fake):
        message = inbound(PARENT, "go")
        await app.bus.publish_inbound(message)
        await replies.wait([message.id])
        tasks = {t.agent_type: t for t in await app.tasks.repo.list(owner_key=PARENT)}

    def offered(key: str) -> set[str]:
        for body in fake.requests:
            system = next(m["content"] for m in body["messages"] if m["role"] == "system")
            if f"- Session: {key}\n" in system + "\n":
                return {t["function"]["name"] for t in body["tools"]}
        raise AssertionError(f"no request of {key}")

    assert offered(tasks["explore"].child_key) == {"read_file", "resolve_path", "recall"}
    general = offered(tasks["general-purpose"].child_key)
    assert "write_file" not in general and "manage_schedule" not in general
    assert {"exec", "read_file", "list_dir", "sessions_spawn", "remember"} <= general
    parent = offered(PARENT)
    assert {"write_file", "manage_schedule", "list_dir"} <= parent


async def test_background_inside_a_child_is_sync_and_list_read_show_progress(
    store_url: str, tmp_path: Path
) -> None:
    def respond(session: str | None, messages: list[dict[str, Any]]) -> ScriptItem:
        user = last_user(messages)
        if session and session.startswith("subagent:"):
            if user == "inner":
                return "inner done"
            if (result := last_text(messages)) is not None:
                return f"outer got: {result}"
            return [spawn_call("inner", mode="background")]
        results = tool_results(messages)
        if results and '"agent_id"' in results[0] and len(results) == 1:
            agent_id = json.loads(results[0])["agent_id"]
            return [
                ("subagents", {"action": "list"}),
                ("subagents", {"action": "read", "agent_id": agent_id}),
                ("subagents", {"action": "read", "agent_id": "nobody"}),
            ]
        if results:
            return "parent saw: " + json.dumps(results)
        return [spawn_call("outer")]

    async with rig(tmp_path, store_url, respond) as (app, replies, _fake):
        message = inbound(PARENT, "go")
        await app.bus.publish_inbound(message)
        (reply,) = await replies.wait([message.id])
        outer = await only_task(app, PARENT)
        inner = await only_task(app, outer.child_key)
    listed, read, missing = json.loads(reply.text.removeprefix("parent saw: "))
    assert inner.mode == "sync" and inner.status == "completed" and inner.depth == 2
    assert [t["id"] for t in json.loads(listed)] == [outer.id]
    shown = json.loads(read)
    assert shown["status"] == "completed"
    assert shown["progress"] == {"turns": 1, "tool_calls": 1, "last_intent": "sessions_spawn"}
    assert json.loads(shown["result"].removeprefix("outer got: "))["result"] == "inner done"
    assert missing.startswith("error: no subagent 'nobody' of this session")
