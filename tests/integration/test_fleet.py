"""/fleet end to end with a scripted model: todos with dependencies run as background
subagents, independent ones in parallel, a dependent one only after its dependencies,
and a gateway restart in the middle runs no todo twice."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

from core.providers.config import ProviderConfig
from core.providers.openai import OpenAIProvider
from core.tools.config import PolicyRule, ToolPolicyConfig, ToolsConfig
from tests.fakes.fake_openai import FakeOpenAI, ScriptItem
from tests.integration.harness import inbound, running_core
from tests.integration.subagent_rig import last_user
from tests.waiting import eventually

MAIN = "test:fleet"
TODOS = (
    ("fetch-a", "Fetch A", []),
    ("fetch-b", "Fetch B", []),
    ("merge", "Merge A and B", ["fetch-a", "fetch-b"]),
)


def _called(messages: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """The tool calls of the last assistant message (name, arguments)."""
    for m in reversed(messages):
        if m.get("role") == "assistant":
            return [
                (c["function"]["name"], json.loads(c["function"]["arguments"] or "{}"))
                for c in m.get("tool_calls") or []
            ]
    return []


class FleetScript:
    """The main agent of /fleet as a model would do it, and children that do their todo.

    Children of ``fetch-a`` and ``fetch-b`` answer only once both run (so they must
    overlap) and once ``release`` is set.
    """

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.started: dict[str, list[float]] = {}
        self.answered: dict[str, float] = {}
        self.refusals: list[str] = []
        self._both = asyncio.Event()

    async def __call__(self, session: str | None, messages: list[dict[str, Any]]) -> ScriptItem:
        if session and session.startswith("subagent:"):
            return await self._child(messages)
        return self._main(messages)

    async def _child(self, messages: list[dict[str, Any]]) -> ScriptItem:
        todo = last_user(messages).split(":", 1)[0]
        self.started.setdefault(todo, []).append(time.monotonic())
        if todo in ("fetch-a", "fetch-b"):
            if {"fetch-a", "fetch-b"} <= set(self.started):
                self._both.set()
            await asyncio.wait_for(self._both.wait(), timeout=20)
            await self.release.wait()
        self.answered[todo] = time.monotonic()
        return f"{todo} result"

    def _main(self, messages: list[dict[str, Any]]) -> ScriptItem:
        last = messages[-1]
        if last.get("role") == "user" and "Fleet request" in str(last.get("content")):
            adds = [
                (
                    "todo",
                    {
                        "action": "add",
                        "id": i,
                        "title": t,
                        "prompt": f"{i}: do {t}",
                        "depends_on": d,
                    },
                )
                for i, t, d in TODOS
            ]
            return [*adds, ("todo", {"action": "start", "id": "merge"})]
        if last.get("role") == "tool":
            called = _called(messages)
            early = len(called) > 1 and called[-1][1] == {"action": "start", "id": "merge"}
            if early:  # the adds, then starting merge before its dependencies: refused
                self.refusals.append(str(last.get("content")))
                return [("todo", {"action": "start"})]
            return "started; waiting for the agents"
        text = str(last.get("content"))
        if "Ready to start now" in text:
            return [("todo", {"action": "start"})]
        if "Still running" in text or "in_progress" in text:
            return "still waiting"
        return [("task_complete", {"summary": "fleet done: merge result"})]


def _provider(fake: FakeOpenAI) -> OpenAIProvider:
    return OpenAIProvider(
        config=ProviderConfig(kind="openai", base_url=fake.base_url, model="fake")
    )


async def _board(app: Any) -> dict[str, Any]:
    return {t.id: t for t in await app.orchestration.todos.list(MAIN)}


async def test_fleet_runs_independent_todos_in_parallel_and_the_dependent_one_after(
    store_url: str, tmp_path: Path
) -> None:
    script = FleetScript()
    script.release.set()
    async with (
        FakeOpenAI(responder=script) as fake,
        running_core(store_url=store_url, workspace=tmp_path / "ws", provider=_provider(fake)) as (
            app,
            replies,
        ),
    ):
        message = inbound(MAIN, "/fleet build the merged report")
        await app.bus.publish_inbound(message)
        (reply,) = await replies.wait([message.id])
        board = await _board(app)
        tasks = {t.id: t for t in await app.tasks.repo.list(owner_key=MAIN)}
        events = await app.events.list(MAIN)
        parent_replies = [r for r in replies.by_inbound.values() if r.session_key == MAIN]
    assert reply.text == "fleet done: merge result"
    assert {k: t.status for k, t in board.items()} == dict.fromkeys(board, "done")
    assert len(tasks) == 3 and {t.agent_id for t in board.values()} == set(tasks)
    assert (
        script.refusals and "waits for fetch-a (pending), fetch-b (pending)" in script.refusals[0]
    )
    # a and b overlapped; merge started only after both had answered.
    assert max(script.started["fetch-a"][0], script.started["fetch-b"][0]) < min(
        script.answered["fetch-a"], script.answered["fetch-b"]
    )
    assert script.started["merge"][0] > max(script.answered["fetch-a"], script.answered["fetch-b"])
    merge_task = tasks[board["merge"].agent_id or ""]
    assert "fetch-a result" in merge_task.prompt and "fetch-b result" in merge_task.prompt
    assert board["merge"].result == "merge result"
    # The results came into the fleet run itself: no handoff turns afterwards.
    assert len(parent_replies) == 1
    types = [e.type for e in events]
    assert "orchestration.started" in types and types.count("todo.updated") >= 9
    assert "session.task_complete" in types


async def test_fleet_survives_a_restart_without_running_a_todo_twice(
    store_url: str, tmp_path: Path
) -> None:
    script = FleetScript()
    workspace = tmp_path / "ws"
    message = inbound(MAIN, "/fleet build the merged report")
    async with FakeOpenAI(responder=script) as fake:
        async with running_core(
            store_url=store_url, workspace=workspace, provider=_provider(fake)
        ) as (app, _replies):
            await app.bus.publish_inbound(message)
            await eventually(
                lambda: {"fetch-a", "fetch-b"} <= set(script.started), what="both todos run"
            )
            before = await _board(app)
        # The first gateway stopped with both agents mid-answer and the fleet waiting.
        script.release.set()
        async with running_core(
            store_url=store_url, workspace=workspace, provider=_provider(fake)
        ) as (app, replies):
            (reply,) = await replies.wait([message.id])
            after = await _board(app)
            tasks = await app.tasks.repo.list(owner_key=MAIN)
    assert {k: t.status for k, t in before.items()} == {
        "fetch-a": "in_progress",
        "fetch-b": "in_progress",
        "merge": "pending",
    }
    assert reply.text == "fleet done: merge result"
    assert {k: t.status for k, t in after.items()} == dict.fromkeys(after, "done")
    # One agent per todo, the same ones before and after the restart.
    assert len(tasks) == 3 and {t.agent_id for t in after.values()} == {t.id for t in tasks}
    assert after["fetch-a"].agent_id == before["fetch-a"].agent_id
    assert after["fetch-b"].agent_id == before["fetch-b"].agent_id
    assert all(t.status == "completed" and t.turns == 1 for t in tasks)
    assert len(script.started["merge"]) == 1


async def test_todos_start_no_agent_where_sessions_spawn_is_denied(
    store_url: str, tmp_path: Path
) -> None:
    """Starting a todo is spawning a subagent: a channel denied ``sessions_spawn`` gets
    no agent through ``todo`` (or ``/fleet``) either."""
    results: list[str] = []

    async def script(session: str | None, messages: list[dict[str, Any]]) -> ScriptItem:
        last = messages[-1]
        if last.get("role") == "tool":
            results.append(str(last.get("content")))
            return "could not start it"
        add = {"action": "add", "id": "a", "title": "Do A", "prompt": "do A"}
        return [("todo", add), ("todo", {"action": "start", "id": "a"})]

    tools = ToolsConfig(
        policy=ToolPolicyConfig(per_channel={"test": PolicyRule(deny=["sessions_spawn"])})
    )
    async with (
        FakeOpenAI(responder=script) as fake,
        running_core(
            store_url=store_url, workspace=tmp_path / "ws", provider=_provider(fake), tools=tools
        ) as (app, replies),
    ):
        message = inbound(MAIN, "/fleet do A")
        await app.bus.publish_inbound(message)
        await replies.wait([message.id])
        board = await _board(app)
        tasks = await app.tasks.repo.list(owner_key=MAIN)
    assert tasks == []
    assert board["a"].status == "pending" and board["a"].agent_id is None
    assert "sessions_spawn" in results[-1] and "denied" in results[-1], results
