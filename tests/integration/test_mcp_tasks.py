"""MCP tools that run as tasks: background ``mcp-task`` records, progress, handoff,
cancel, restart, elicitation and sampling, against a raw JSON-RPC task server
(`tests.fakes.mcp_task_server`) run by the gateway in-process."""

from __future__ import annotations

import asyncio
import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from core.store.engine import Store
from core.tasks.repository import TaskRepository
from gateway.cli import app
from tests.fakes.fake_openai import FakeOpenAI, ToolCalls
from tests.fakes.mcp_procs import ROOT
from tests.integration.test_daemon import Gateway, running, write_config
from tests.waiting import eventually

HANDOFF = "[subagent handoff]"


@pytest.fixture(autouse=True)
def _restore_logging(restore_root_logging: None) -> None:
    """The daemon runs in-process."""


def servers(state: Path, *, sampling: bool = False, tasks: str = "required") -> str:
    return f"""
[mcp]
first_turn_wait = 60
elicitation_timeout = 120

[mcp.servers.fake]
command = "{sys.executable}"
args = ["-m", "tests.fakes.mcp_task_server"]
cwd = "{ROOT}"
env = {{ PYTHONPATH = "{ROOT}", FAKE_TASKS_DIR = "{state}" }}
eager = true
tasks = "{tasks}"
sampling = {"true" if sampling else "false"}
"""


def tool_results(fake: FakeOpenAI) -> list[str]:
    found = []
    for body in fake.requests:
        last = body["messages"][-1]
        if last.get("role") == "tool":
            found.append(str(last.get("content")))
    return found


def handoffs(fake: FakeOpenAI) -> list[str]:
    return [
        str(m.get("content"))
        for body in fake.requests
        for m in body["messages"][-1:]
        if m.get("role") == "user" and HANDOFF in str(m.get("content"))
    ]


def remote_tasks(state: Path) -> dict[str, Any]:
    """The one task the fake server keeps in ``state``."""
    (path,) = state.glob("*.json")
    found: dict[str, Any] = json.loads(path.read_text())
    return found


def forget_tasks(state: Path) -> None:
    for path in state.glob("*.json"):
        path.unlink()


async def only_task(gw: Gateway) -> dict[str, Any]:
    tasks = (await gw.get("/v1/tasks?owner=cli:test"))["tasks"]
    assert len(tasks) == 1, tasks
    return await gw.get(f"/v1/tasks/{tasks[0]['id']}")


async def start_research(gw: Gateway, fake: FakeOpenAI, **arguments: Any) -> dict[str, Any]:
    fake.script(
        ToolCalls((("mcp__fake__research", {"topic": "python", **arguments}),)),
        "It runs in the background.",
    )
    lines = await gw.send("research python")
    assert lines[-1]["text"] == "It runs in the background."
    assert "started in background as task" in tool_results(fake)[-1]
    return await only_task(gw)


async def status_is(gw: Gateway, task_id: str, status: str) -> bool:
    return bool((await gw.get(f"/v1/tasks/{task_id}"))["status"] == status)


@pytest.mark.slow
async def test_a_required_task_tool_runs_in_background_and_hands_its_result_over(
    daemon_home: Path, tmp_path: Path
) -> None:
    home = daemon_home
    async with FakeOpenAI() as fake:
        write_config(home, fake, servers(tmp_path))
        async with running(home) as gw:

            async def listed() -> Any:
                status = await gw.get("/v1/status")
                return [s["task_support"] for s in status["mcp"] if s["state"] == "ready"]

            await eventually(listed, what="the server is ready")
            assert await listed() == [{"mcp__fake__research": "required"}]
            shown = await asyncio.to_thread(
                CliRunner().invoke, app, ["mcp", "list", "--home", str(home)]
            )
            assert "mcp__fake__research (task: required)" in shown.stdout, shown.output
            assert "mcp__fake__lookup," in shown.stdout  # optional: a plain call here
            task = await start_research(gw, fake)
            assert task["agent_type"] == "mcp-task" and task["mode"] == "background"
            assert task["status"] == "running"
            assert json.loads(task["prompt"]) == {"topic": "python"}
            assert task["description"] == "fake/research"

            async def gathering() -> bool:
                found = await gw.get(f"/v1/tasks/{task['id']}")
                return "Gathering sources" in str(found["progress"]["last_intent"])

            await eventually(gathering, what="the status message as progress")
            fake.script("Here is the report.")
            (tmp_path / "go").touch()
            await eventually(
                lambda: status_is(gw, task["id"], "completed"), what="the task completed"
            )
            done = await gw.get(f"/v1/tasks/{task['id']}")
            await eventually(lambda: len(handoffs(fake)) == 1, what="the handoff reached the model")
            events = (await gw.get("/v1/sessions/cli:test?events=1"))["events"]
    assert done["result"] == "report on python (general)"
    assert done["progress"]["last_intent"] == "Done"
    (handoff,) = handoffs(fake)
    assert "report on python (general)" in handoff and task["id"] in handoff
    kinds = [e["type"] for e in events if e["data"].get("agent_id") == task["id"]]
    assert kinds == ["subagent.started", "subagent.completed"]


@pytest.mark.slow
async def test_cancel_reaches_the_server_and_send_is_refused(
    daemon_home: Path, tmp_path: Path
) -> None:
    home = daemon_home
    async with FakeOpenAI() as fake:
        write_config(home, fake, servers(tmp_path))
        async with running(home) as gw:
            task = await start_research(gw, fake)
            fake.script(
                ToolCalls(
                    (("subagents", {"action": "send", "agent_id": task["id"], "message": "hi"}),)
                ),
                "ok",
            )
            await gw.send("tell it more")
            refused = tool_results(fake)[-1]
            async with gw.http.delete(f"http://familiar/v1/tasks/{task['id']}") as response:
                cancelled = await response.json()
            log = tmp_path / "log"

            def cancel_logged() -> bool:
                return log.exists() and "cancel " in log.read_text()

            await eventually(cancel_logged, what="tasks/cancel reached the server")
            remote = await asyncio.to_thread(remote_tasks, tmp_path)
            done = await gw.get(f"/v1/tasks/{task['id']}")
    assert "takes no messages" in refused and "start a new task" in refused
    assert cancelled["cancelled"] == [task["id"]]
    assert f"cancel {remote['taskId']}" in log.read_text()
    assert remote["status"] == "cancelled"
    assert done["status"] == "cancelled"
    assert handoffs(fake) == []


@pytest.mark.slow
async def test_a_restart_resumes_polling_and_hands_the_result_over_once(
    daemon_home: Path, tmp_path: Path
) -> None:
    home = daemon_home
    async with FakeOpenAI() as fake:
        write_config(home, fake, servers(tmp_path))
        async with running(home) as gw:
            task = await start_research(gw, fake)
        (tmp_path / "go").touch()  # the task goes on while no gateway runs
        fake.script("Report received.")
        async with running(home) as gw:
            await eventually(
                lambda: status_is(gw, task["id"], "completed"), what="completed after restart"
            )
            await eventually(lambda: len(handoffs(fake)) == 1, what="the handoff")
            done = await gw.get(f"/v1/tasks/{task['id']}")
        async with running(home) as gw:  # a third start finds nothing left to do
            again = await gw.get(f"/v1/tasks/{task['id']}")
    assert done["result"] == "report on python (general)"
    assert again["status"] == "completed" and len(handoffs(fake)) == 1


@pytest.mark.slow
async def test_a_task_the_server_forgot_fails_with_the_reason(
    daemon_home: Path, tmp_path: Path
) -> None:
    home = daemon_home
    async with FakeOpenAI() as fake:
        write_config(home, fake, servers(tmp_path))
        async with running(home) as gw:
            task = await start_research(gw, fake)
        await asyncio.to_thread(forget_tasks, tmp_path)  # the next server will not know it
        fake.script("Noted.")
        async with running(home) as gw:
            await eventually(lambda: status_is(gw, task["id"], "failed"), what="failed")
            done = await gw.get(f"/v1/tasks/{task['id']}")
            await eventually(lambda: len(handoffs(fake)) == 1, what="the failure handed over")
    assert "no longer knows task" in done["error"]


@pytest.mark.slow
async def test_an_ambiguous_task_asks_in_the_session_and_the_answer_completes_it(
    daemon_home: Path, tmp_path: Path
) -> None:
    home = daemon_home
    async with FakeOpenAI() as fake:
        write_config(home, fake, servers(tmp_path))
        async with running(home) as gw:
            task = await start_research(gw, fake, ambiguous=True)
            (tmp_path / "go").touch()

            async def asked() -> str | None:
                unread = (await gw.get("/v1/sessions/cli:test"))["unread"]
                texts = [u["text"] for u in unread if "asks (question" in u["text"]]
                return texts[-1] if texts else None

            await eventually(asked, what="the question shown in the session")
            question = await asked()
            assert question is not None
            qid = re.search(r"question (\w+)", question)
            assert qid is not None
            bad = await gw.send(f"/answer {qid.group(1)} 7")
            fake.script("The snake it is.")
            good = await gw.send(f"/answer {qid.group(1)} The snake")
            await eventually(lambda: status_is(gw, task["id"], "completed"), what="completed")
            done = await gw.get(f"/v1/tasks/{task['id']}")
    assert "What do you mean by 'python'?" in question
    assert "snake — The snake" in question and "programming — The language" in question
    assert "not one of the choices" in bad[-1]["text"]
    assert good[-1]["text"].startswith("Answered question")
    assert done["result"] == "report on python (snake)"


@pytest.mark.slow
async def test_sampling_is_refused_unless_enabled_and_answered_by_the_model_when_it_is(
    daemon_home: Path, tmp_path: Path
) -> None:
    home = daemon_home
    results = []
    for enabled in (False, True):
        async with FakeOpenAI() as fake:
            write_config(home, fake, servers(tmp_path, sampling=enabled))
            fake.script(
                ToolCalls((("mcp__fake__sample", {"prompt": "say hi"}),)),
                *(["hi from the fake model"] if enabled else []),
                "done",
            )
            async with running(home) as gw:
                await gw.send("sample it", session=f"cli:s{int(enabled)}")
                events = (await gw.get(f"/v1/sessions/cli:s{int(enabled)}?events=1"))["events"]
            sampling = [e for e in events if e["type"] == "mcp.sampling"]
            results.append((tool_results(fake)[-1], sampling))
            sampled = fake.requests[1] if enabled else None
    (refused, refused_events), (answered, answered_events) = results
    assert "refused:" in refused and "sampling = true" in refused
    assert refused_events[0]["data"]["refused"]
    assert "model said: hi from the fake model" in answered
    assert sampled is not None and sampled["messages"][-1]["content"] == "say hi"
    assert sampled["max_tokens"] == 1024 or sampled.get("max_completion_tokens") == 1024
    (event,) = answered_events
    assert event["data"]["max_tokens"] == 1024 and "refused" not in event["data"]


@pytest.mark.slow
async def test_sampling_outside_any_call_is_refused_even_when_enabled(
    daemon_home: Path, tmp_path: Path
) -> None:
    """A request no call or task of ours owns has no session to record its cost in."""
    async with FakeOpenAI() as fake:
        write_config(daemon_home, fake, servers(tmp_path, sampling=True))
        fake.script(ToolCalls((("mcp__fake__sample_later", {"prompt": "say hi"}),)), "done")
        async with running(daemon_home) as gw:
            await gw.send("sample later", session="cli:late")
            asked = len(fake.requests)
            (tmp_path / "sample").touch()
            log = tmp_path / "log"
            await eventually(
                lambda: log.exists() and "late sampling" in log.read_text(),
                what="the server asked outside any call",
            )
            events = (await gw.get("/v1/sessions/cli:late?events=1"))["events"]
    (line,) = [x for x in log.read_text().splitlines() if x.startswith("late sampling")]
    assert "refused:" in line and "outside any conversation" in line, line
    assert len(fake.requests) == asked  # the model was not asked
    assert [e for e in events if e["type"] == "mcp.sampling"] == []


@pytest.mark.slow
async def test_inside_a_subagent_the_call_waits_for_the_task(
    daemon_home: Path, tmp_path: Path
) -> None:
    async with FakeOpenAI() as fake:
        write_config(daemon_home, fake, servers(tmp_path))
        (tmp_path / "go").touch()
        spawn = {"agent_type": "general-purpose", "prompt": "research tides", "mode": "sync"}
        fake.script(
            ToolCalls((("sessions_spawn", spawn),)),
            ToolCalls((("mcp__fake__research", {"topic": "tides"}),)),
            "child done",
            "parent done",
        )
        async with running(daemon_home) as gw:
            lines = await gw.send("delegate")
            tasks = (await gw.get("/v1/tasks"))["tasks"]
    (child,) = [t for t in tasks if t["agent_type"] == "general-purpose"]
    (task,) = [t for t in tasks if t["agent_type"] == "mcp-task"]
    assert lines[-1]["text"] == "parent done"
    assert "report on tides (general)" in tool_results(fake)
    assert task["mode"] == "sync" and task["owner"] == child["session"]
    assert task["status"] == "completed" and handoffs(fake) == []


@pytest.mark.slow
async def test_optional_task_tools_run_as_tasks_only_where_the_server_says_so(
    daemon_home: Path, tmp_path: Path
) -> None:
    outcomes = []
    for tasks in ("required", "optional"):
        async with FakeOpenAI() as fake:
            write_config(daemon_home, fake, servers(tmp_path, tasks=tasks))
            fake.script(ToolCalls((("mcp__fake__lookup", {"text": "tides"}),)), "ok", "ok")
            async with running(daemon_home) as gw:
                await gw.send("look it up", session=f"cli:{tasks}")
                await asyncio.to_thread((tmp_path / "go").touch)
                found = (await gw.get(f"/v1/tasks?owner=cli:{tasks}"))["tasks"]
                if found:
                    task_id = found[0]["id"]
                    await eventually(
                        lambda: status_is(gw, task_id, "completed"),  # noqa: B023 (awaited here)
                        what="completed",
                    )
                    found = [await gw.get(f"/v1/tasks/{task_id}")]
            outcomes.append((tool_results(fake)[0], found))
    (plain, none), (started, (task,)) = outcomes
    assert plain == "looked up tides at once" and none == []
    assert "started in background" in started
    assert task["description"] == "fake/lookup" and task["result"] == "looked up tides"


@pytest.mark.slow
async def test_a_task_the_server_fails_ends_failed_and_is_handed_over(
    daemon_home: Path, tmp_path: Path
) -> None:
    async with FakeOpenAI() as fake:
        write_config(daemon_home, fake, servers(tmp_path))
        (tmp_path / "go").touch()
        fake.script(ToolCalls((("mcp__fake__research", {"topic": "boom"}),)), "ok", "Sorry.")
        async with running(daemon_home) as gw:
            await gw.send("research boom")
            (task,) = (await gw.get("/v1/tasks?owner=cli:test"))["tasks"]
            await eventually(lambda: status_is(gw, task["id"], "failed"), what="failed")
            await eventually(lambda: len(handoffs(fake)) == 1, what="the failure handed over")
            done = await gw.get(f"/v1/tasks/{task['id']}")
    assert done["error"] == "the analysis exploded"
    assert "finished with status failed" in handoffs(fake)[0]


@pytest.mark.slow
async def test_a_task_cancelled_while_no_gateway_runs_is_cancelled_on_its_server_at_start(
    daemon_home: Path, tmp_path: Path
) -> None:
    async with FakeOpenAI() as fake:
        write_config(daemon_home, fake, servers(tmp_path))
        async with running(daemon_home) as gw:
            task = await start_research(gw, fake)
        store = Store(url=f"sqlite+aiosqlite:///{daemon_home / 'familiar.db'}")
        await store.open()
        try:
            registry_repo = TaskRepository(store=store)
            await store.transact(
                lambda conn: registry_repo.update_in(
                    conn, task["id"], {"status": "cancelled", "error": "cancelled offline"}
                )
            )
        finally:
            await store.close()
        async with running(daemon_home) as gw:
            log = tmp_path / "log"

            def cancel_logged() -> bool:
                return log.exists() and "cancel " in log.read_text()

            await eventually(cancel_logged, what="tasks/cancel at start")
    assert remote_tasks(tmp_path)["status"] == "cancelled"
