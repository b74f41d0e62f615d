"""MCP tasks in the default multi-process gateway, for real: a task started in one agent
worker, its question answered by whichever worker claims the ``/answer``, cancelled
from the CLI, and resumed after a graceful restart with its result handed over once."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_daemon_process import fake_openai
from tests.e2e.test_mcp_processes import TIMEOUT, familiar
from tests.e2e.test_processes import Gateway, running, write_config
from tests.fakes.mcp_procs import ROOT
from tests.waiting import eventually

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


@pytest.fixture
def home() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="fam-", dir="/tmp"))  # short: a socket lives here
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def section(state: Path) -> str:
    return (
        "\n[mcp]\nelicitation_timeout = 300\n\n[mcp.servers.fake]\n"
        f'command = "{sys.executable}"\nargs = ["-m", "tests.fakes.mcp_task_server"]\n'
        f'cwd = "{ROOT}"\n'
        f'env = {{ PYTHONPATH = "{ROOT}", FAKE_TASKS_DIR = "{state}" }}\neager = true\n'
    )


async def start_task(gw: Gateway, session: str, **arguments: Any) -> dict[str, Any]:
    """Have the model call ``research`` (the fake's ``!tool`` rule); the new record."""
    args = json.dumps({"topic": "python", **arguments})
    lines = await gw.send_streaming(session, f"!tool mcp__fake__research {args}")
    assert "started in background as task" in lines[-1]["text"], lines
    (task,) = (await gw.get(f"/v1/tasks?owner={session}"))["tasks"]
    return dict(task)


async def record(gw: Gateway, task_id: str) -> dict[str, Any]:
    return dict(await gw.get(f"/v1/tasks/{task_id}"))


async def completed_events(gw: Gateway, session: str, task_id: str) -> list[dict[str, Any]]:
    events = (await gw.get(f"/v1/sessions/{session}?events=1"))["events"]
    return [
        e
        for e in events
        if e["type"] == "subagent.completed" and e["data"].get("agent_id") == task_id
    ]


async def test_tasks_questions_cancel_and_restart_across_processes(home: Path) -> None:
    state = home / "tasks"
    state.mkdir()
    async with fake_openai() as base_url:
        write_config(home, base_url, workers=2, extra=section(state))
        async with running(home) as gw:
            await gw.wait_ready()
            # A question, answered from any worker.
            asked = await start_task(gw, "cli:q", ambiguous=True)
            await asyncio.to_thread((state / "go").touch)

            async def question() -> str | None:
                unread = (await gw.get("/v1/sessions/cli:q"))["unread"]
                texts = [u["text"] for u in unread if "asks (question" in u["text"]]
                return texts[-1] if texts else None

            await eventually(question, timeout=TIMEOUT, what="the question in the session")
            text = await question()
            assert text is not None
            qid = re.search(r"question (\w+)", text)
            assert qid is not None
            answered = await gw.send_streaming("cli:q", f"/answer {qid.group(1)} programming")

            async def done(task_id: str, status: str) -> bool:
                return (await record(gw, task_id))["status"] == status

            await eventually(lambda: done(asked["id"], "completed"), timeout=TIMEOUT)
            interpreted = await record(gw, asked["id"])
            # Cancelled from the CLI: the polling worker cancels it on the server.
            await asyncio.to_thread((state / "go").unlink)
            doomed = await start_task(gw, "cli:c")
            cancelled = await familiar(home, "tasks", "cancel", doomed["id"])
            log = state / "log"
            await eventually(
                lambda: log.exists() and "cancel " in log.read_text(),
                timeout=TIMEOUT,
                what="tasks/cancel reached the server",
            )
            # A task running across a graceful restart.
            kept = await start_task(gw, "cli:r")
            assert await gw.stop() == 0
        await asyncio.to_thread((state / "go").touch)
        async with running(home) as gw:
            await gw.wait_ready()
            try:
                await eventually(lambda: done(kept["id"], "completed"), timeout=TIMEOUT)
            except AssertionError:  # say where it stuck: the record and both runs' logs
                lines = gw.logs().splitlines()
                mcp = [line for line in lines if "mcp" in line or "stopp" in line]
                raise AssertionError(
                    f"the task did not complete after the restart: {await record(gw, kept['id'])}"
                    "\n" + "\n".join(mcp[-60:])
                ) from None
            await eventually(
                lambda: _one(completed_events(gw, "cli:r", kept["id"])), timeout=TIMEOUT
            )
            finished = await record(gw, kept["id"])
            handed = (await gw.get("/v1/sessions/cli:r"))["history"]
    assert answered[-1]["text"].startswith("Answered question")
    assert interpreted["result"] == "report on python (programming)"
    assert finished["result"] == "report on python (general)"
    assert cancelled.returncode == 0, cancelled.stderr
    handoffs = [  # (the model's answer to it may quote it, once that turn has run)
        m for m in handed if m["role"] == "user" and "[subagent handoff]" in str(m["content"])
    ]
    assert len(handoffs) == 1 and "report on python (general)" in str(handoffs[0]["content"])


async def _one(events: Any) -> bool:
    return len(await events) == 1
