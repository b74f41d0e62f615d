"""The task bridge, elicitation and sampling against the MCP reference server
``@modelcontextprotocol/server-everything`` (from npm; skipped without node and npm,
except under CI=true): ``simulate-research-query`` requires tasks, asks its question
when the topic is ambiguous, and ``trigger-sampling-request`` asks our model."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.everything import everything_command
from tests.fakes.fake_openai import FakeOpenAI, ToolCalls
from tests.integration.test_daemon import Gateway, running, write_config
from tests.integration.test_mcp_tasks import handoffs, status_is, tool_results
from tests.waiting import eventually

RESEARCH = "mcp__everything__simulate-research-query"
pytestmark = [pytest.mark.timeout(300)]  # the first test may install the package from npm


@pytest.fixture(autouse=True)
def _restore_logging(restore_root_logging: None) -> None:
    """The daemon runs in-process."""


@pytest.fixture(scope="module")
def everything() -> list[str]:
    return everything_command()


def servers(command: list[str]) -> str:
    return f"""
[mcp]
first_turn_wait = 60

[mcp.servers.everything]
command = {json.dumps(command[0])}
args = {json.dumps(command[1:])}
eager = true
sampling = true
"""


async def ready(gw: Gateway) -> dict[str, Any]:
    async def listed() -> bool:
        status = await gw.get("/v1/status")
        return any(RESEARCH in s["task_support"] for s in status["mcp"])

    await eventually(listed, timeout=60, what="server-everything lists its task tool")
    (server,) = (await gw.get("/v1/status"))["mcp"]
    return dict(server)


async def research(gw: Gateway, fake: FakeOpenAI, **arguments: Any) -> dict[str, Any]:
    fake.script(ToolCalls(((RESEARCH, {"topic": "python", **arguments}),)), "Started.")
    await gw.send("research python")
    assert "started in background as task" in tool_results(fake)[-1]
    (task,) = (await gw.get("/v1/tasks?owner=cli:test"))["tasks"]
    return dict(task)


@pytest.mark.slow
async def test_a_research_query_runs_as_a_background_task_with_its_stages_as_progress(
    daemon_home: Path, everything: list[str]
) -> None:
    async with FakeOpenAI() as fake:
        write_config(daemon_home, fake, servers(everything))
        async with running(daemon_home) as gw:
            server = await ready(gw)
            task = await research(gw, fake)
            seen: set[str] = set()

            async def progressed() -> bool:
                found = await gw.get(f"/v1/tasks/{task['id']}")
                seen.add(str(found["progress"]["last_intent"]))
                return bool(found["status"] == "completed")

            fake.script("The report is in.")
            await eventually(progressed, timeout=60, what="the research completed")
            done = await gw.get(f"/v1/tasks/{task['id']}")
            await eventually(lambda: len(handoffs(fake)) == 1, what="the handoff")
    assert server["task_support"][RESEARCH] == "required"
    assert task["agent_type"] == "mcp-task" and task["status"] == "running"
    stages = ("Gathering sources", "Analyzing content", "Synthesizing findings", "Generating")
    assert any(stage in text for stage in stages for text in seen), seen
    assert "# Research Report: python" in done["result"]
    assert "Research Report: python" in handoffs(fake)[0]


@pytest.mark.slow
async def test_an_ambiguous_query_asks_in_the_session_and_the_answer_completes_it(
    daemon_home: Path, everything: list[str]
) -> None:
    async with FakeOpenAI() as fake:
        write_config(daemon_home, fake, servers(everything))
        async with running(daemon_home) as gw:
            await ready(gw)
            task = await research(gw, fake, ambiguous=True)

            async def question() -> str | None:
                unread = (await gw.get("/v1/sessions/cli:test"))["unread"]
                texts = [u["text"] for u in unread if "asks (question" in u["text"]]
                return texts[-1] if texts else None

            await eventually(question, timeout=60, what="the question in the session")
            asked = await question()
            assert asked is not None
            qid = re.search(r"question (\w+)", asked)
            assert qid is not None
            answered = await gw.send(f"/answer {qid.group(1)} 2")
            fake.script("Snakes, then.")
            await eventually(
                lambda: status_is(gw, task["id"], "completed"), timeout=60, what="completed"
            )
            done = await gw.get(f"/v1/tasks/{task['id']}")
    assert "Python snake species" in asked and "programming" in asked
    assert answered[-1]["text"].startswith("Answered question")
    assert "# Research Report: python (snake)" in done["result"]


@pytest.mark.slow
async def test_a_sampling_request_is_answered_by_the_model_when_allowed(
    daemon_home: Path, everything: list[str]
) -> None:
    async with FakeOpenAI() as fake:
        write_config(daemon_home, fake, servers(everything))
        async with running(daemon_home) as gw:
            await ready(gw)
            fake.script(
                ToolCalls((("mcp__everything__trigger-sampling-request", {"prompt": "hi"}),)),
                "a sampled answer",
                "done",
            )
            await gw.send("sample")
            events = (await gw.get("/v1/sessions/cli:test?events=1"))["events"]
    assert "a sampled answer" in tool_results(fake)[-1]
    (event,) = [e for e in events if e["type"] == "mcp.sampling"]
    assert event["data"]["server"] == "everything" and event["data"]["max_tokens"] == 100
