"""A real daemon killed with SIGKILL while a subagent works: after restart the child
finishes and its parent gets exactly one result (background handoff and sync spawn)."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_daemon_process import Daemon, _db_rows, daemon, fake_openai, home, write_config
from tests.waiting import eventually

pytestmark = pytest.mark.slow
__all__ = ["home"]  # the fixture, shared with the daemon tests

HANDOFF_LIKE = "[subagent handoff]%"


def _spawn(prompt: str, mode: str) -> str:
    args = {"agent_type": "general-purpose", "prompt": prompt, "mode": mode}
    return "!tool sessions_spawn " + json.dumps(args)


async def _rows(d: Daemon, query: str) -> list[tuple[Any, ...]]:
    return await asyncio.to_thread(_db_rows, d.home, query)


async def _until(d: Daemon, query: str, check: Any, what: str) -> list[tuple[Any, ...]]:
    try:
        async with asyncio.timeout(90):
            while True:
                try:
                    rows = await _rows(d, query)
                except sqlite3.OperationalError as exc:  # not migrated yet, or locked
                    if "no such table" not in str(exc) and "locked" not in str(exc):
                        raise
                    rows = []
                if check(rows):
                    return rows
                await asyncio.sleep(0.1)
    except TimeoutError:
        raise AssertionError(f"{what} never happened:\n{d.logs()[-4000:]}") from None


async def _kill_while_child_works(d: Daemon) -> tuple[str, str]:
    (task,) = await _until(
        d,
        "SELECT id, message_id FROM subagent_tasks",
        lambda rows: len(rows) == 1,
        "the subagent started",
    )
    task_id, child_message = task

    async def claimed() -> bool:
        # The row is written before the child's message is published: 404 until then.
        status, body = await d.fetch(f"/v1/messages/{child_message}")
        return status == 200 and body["status"] == "claimed"

    await eventually(claimed, timeout=60, what="the child's message claimed")
    await d.kill()
    return str(task_id), str(child_message)


async def test_background_child_killed_mid_turn_finishes_after_restart_one_handoff(
    home: Path,
) -> None:
    async with fake_openai() as base_url:
        write_config(home, base_url, lease=600.0)
        async with daemon(home) as d:
            await d.wait_ready()
            parent = await d.submit("cli:p", _spawn("!sleep 3 child work", "background"))
            task_id, child_message = await _kill_while_child_works(d)
        async with daemon(home) as d:
            await d.wait_ready()
            await _until(
                d,
                "SELECT status FROM subagent_tasks",
                lambda rows: rows == [("completed",)],
                "the child completed",
            )
            replies = await _until(
                d,
                "SELECT inbound_id, payload FROM outbound WHERE session_key = 'cli:p'",
                lambda rows: len(rows) == 2,
                "the parent answered the handoff",
            )
            # Let the collector finish (its reply is marked delivered) before counting.
            await _until(
                d,
                "SELECT status FROM outbound WHERE channel = 'subagent'",
                lambda rows: rows == [("delivered",)],
                "the child's answer was collected",
            )
            handoffs = await _rows(
                d,
                "SELECT count(*) FROM history WHERE session_key = 'cli:p' AND role = 'user' "
                f"AND content LIKE '{HANDOFF_LIKE}'",
            )
            child_replies = await _rows(
                d, f"SELECT payload FROM outbound WHERE inbound_id = '{child_message}'"
            )
            result = await _rows(d, f"SELECT result FROM subagent_tasks WHERE id = '{task_id}'")
    assert handoffs == [(1,)]
    assert [json.loads(p)["text"] for (p,) in child_replies] == ["echo: !sleep 3 child work"]
    assert result == [("echo: !sleep 3 child work",)]
    texts = {i: json.loads(p)["text"] for i, p in replies}
    assert texts[parent].startswith("tool said: ")
    (handoff_reply,) = [t for i, t in texts.items() if i != parent]
    assert handoff_reply.startswith("echo: [subagent handoff]")


async def test_sync_child_killed_mid_turn_parent_rerun_finds_it_one_result(home: Path) -> None:
    async with fake_openai() as base_url:
        write_config(home, base_url, lease=600.0)
        async with daemon(home) as d:
            await d.wait_ready()
            parent = await d.submit("cli:s", _spawn("!sleep 3 sync work", "sync"))
            task_id, child_message = await _kill_while_child_works(d)
        async with daemon(home) as d:
            await d.wait_ready()
            (reply,) = await _until(
                d,
                f"SELECT payload FROM outbound WHERE inbound_id = '{parent}'",
                lambda rows: len(rows) == 1,
                "the parent answered",
            )
            tasks = await _rows(d, "SELECT id, status FROM subagent_tasks")
            child_replies = await _rows(
                d, f"SELECT count(*) FROM outbound WHERE inbound_id = '{child_message}'"
            )
            parent_replies = await _rows(
                d, "SELECT count(*) FROM outbound WHERE session_key = 'cli:s'"
            )
    # The rerun of the parent's message found the same child instead of a second one.
    assert [t[0] for t in tasks] == [task_id]
    assert child_replies == [(1,)]
    assert parent_replies == [(1,)]
    text = json.loads(reply[0])["text"]
    assert text.startswith("tool said: ")
    assert "echo: !sleep 3 sync work" in text
