"""A real daemon killed with SIGKILL in the middle of a /fleet run: after restart the run
goes on, every todo is done by exactly one agent, and the message gets one reply."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from tests.e2e.test_daemon_process import daemon, home, write_config
from tests.e2e.test_subagents_process import _rows, _until
from tests.fakes.fake_openai import FakeOpenAI
from tests.integration.test_fleet import FleetScript

pytestmark = pytest.mark.slow
__all__ = ["home"]  # the fixture, shared with the daemon tests

SESSION = "cli:fleet"
_TODOS = f"SELECT id, status, agent_id FROM todos WHERE session_key = '{SESSION}' ORDER BY seq"


async def test_fleet_killed_mid_run_finishes_after_restart_one_agent_per_todo(
    home: Path,
) -> None:
    script = FleetScript()
    async with FakeOpenAI(responder=script) as llm:
        write_config(home, llm.base_url, lease=600.0)
        async with daemon(home) as d:
            await d.wait_ready()
            message = await d.submit(SESSION, "/fleet build the merged report")
            async with asyncio.timeout(60):
                while not {"fetch-a", "fetch-b"} <= set(script.started):
                    await asyncio.sleep(0.05)
            before = await _rows(d, _TODOS)
            await d.kill()
        script.release.set()
        async with daemon(home) as d:
            await d.wait_ready()
            (reply,) = await _until(
                d,
                f"SELECT payload FROM outbound WHERE inbound_id = '{message}'",
                lambda rows: len(rows) == 1,
                "the fleet message answered",
            )
            after = await _rows(d, _TODOS)
            tasks = await _rows(
                d, f"SELECT id, status, turns FROM subagent_tasks WHERE owner_key = '{SESSION}'"
            )
            replies = await _rows(
                d, f"SELECT count(*) FROM outbound WHERE session_key = '{SESSION}'"
            )
    assert [(i, s) for i, s, _ in before] == [
        ("fetch-a", "in_progress"),
        ("fetch-b", "in_progress"),
        ("merge", "pending"),
    ]
    assert json.loads(reply[0])["text"] == "fleet done: merge result"
    assert [(i, s) for i, s, _ in after] == [
        ("fetch-a", "done"),
        ("fetch-b", "done"),
        ("merge", "done"),
    ]
    assert [a for _, _, a in after[:2]] == [a for _, _, a in before[:2]]  # same agents
    assert sorted(t[0] for t in tasks) == sorted(a for _, _, a in after)
    assert all(status == "completed" and turns == 1 for _, status, turns in tasks)
    assert len(script.started["merge"]) == 1
    assert replies == [(1,)]
