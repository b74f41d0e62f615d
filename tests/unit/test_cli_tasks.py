"""``familiar tasks list|show|cancel`` against the real control server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.tasks.registry import SpawnRequest
from gateway.control.client import ControlClient, ControlError
from tests.integration.control_stack import ControlStack
from tests.unit.test_cli_client import LoopThread, cli
from tests.unit.test_cli_client import daemon as daemon
from tests.unit.test_cli_client import home as home
from tests.unit.test_cli_client import loop_thread as loop_thread
from tests.waiting import eventually_sync


def _spawn(
    daemon: ControlStack, loop_thread: LoopThread, prompt: str, owner: str, depth: int = 0
) -> str:
    request = SpawnRequest(
        owner_key=owner,
        owner_depth=depth,
        agent_type="explore",
        prompt=prompt,
        description=f"doing {prompt}",
        mode="background",
    )
    task, _ = loop_thread.run(daemon.core.tasks.spawn(request))
    return task.id


def _status(home: Path, task_id: str) -> str:
    result = cli("tasks", "show", task_id, "--json", "--home", str(home))
    assert result.exit_code == 0, result.stderr
    return str(json.loads(result.stdout)["status"])


def test_list_show_cancel(daemon: ControlStack, home: Path, loop_thread: LoopThread) -> None:
    done = _spawn(daemon, loop_thread, "hello", "cli:alice")
    hung = _spawn(daemon, loop_thread, "!hang", "cli:bob")
    eventually_sync(lambda: _status(home, done) == "completed", what="the first task completed")

    result = cli("tasks", "list", "--json", "--home", str(home))
    assert result.exit_code == 0, result.stderr
    listed = {t["id"]: t for t in json.loads(result.stdout)["tasks"]}
    assert listed.keys() == {done, hung}
    assert listed[hung]["status"] == "running" and listed[hung]["owner"] == "cli:bob"
    assert listed[done]["progress"]["turns"] == 1

    result = cli("tasks", "list", "--owner", "cli:alice", "--home", str(home))
    assert result.exit_code == 0 and done in result.stdout and hung not in result.stdout

    result = cli("tasks", "show", done, "--json", "--home", str(home))
    shown = json.loads(result.stdout)
    assert shown["result"] == "echo: hello"
    assert [m["content"] for m in shown["history"]] == ["hello", "echo: hello"]
    result = cli("tasks", "show", done, "--home", str(home))
    assert "result: echo: hello" in result.stdout and "explore" in result.stdout

    result = cli("tasks", "cancel", hung, "--home", str(home))
    assert result.exit_code == 0 and f"Cancelled {hung}." in result.stdout
    assert _status(home, hung) == "cancelled"
    result = cli("tasks", "cancel", hung, "--home", str(home))
    assert result.exit_code == 0 and "had already finished (cancelled)" in result.stdout

    result = cli("tasks", "show", "nope", "--home", str(home))
    assert result.exit_code == 1 and "no task 'nope'" in result.stderr
    result = cli("tasks", "cancel", "nope", "--home", str(home))
    assert result.exit_code == 1 and "no subagent 'nope'" in result.stderr


def test_tree_nests_children_under_their_session_and_cancel_records_who(
    daemon: ControlStack, home: Path, loop_thread: LoopThread
) -> None:
    parent = _spawn(daemon, loop_thread, "!hang parent", "cli:alice")
    child = _spawn(daemon, loop_thread, "hello child", f"subagent:{parent}", depth=1)
    other = _spawn(daemon, loop_thread, "hello bob", "cli:bob")
    eventually_sync(
        lambda: _status(home, child) == "completed" and _status(home, other) == "completed",
        what="the child and bob's task completed",
    )

    result = cli("tasks", "list", "--tree", "--json", "--home", str(home))
    assert result.exit_code == 0, result.stderr
    trees = {t["session"]: t for t in json.loads(result.stdout)["sessions"]}
    assert trees.keys() == {"cli:alice", "cli:bob"}
    (top,) = trees["cli:alice"]["tasks"]
    assert (top["id"], top["status"]) == (parent, "running")
    assert top["progress"]["current"] == {"tool_calls": 0, "tool": None}
    assert [(c["id"], c["status"], c["children"]) for c in top["children"]] == [
        (child, "completed", [])
    ]
    assert "current" not in top["children"][0]["progress"]
    assert (trees["cli:alice"]["total"], trees["cli:alice"]["active"]) == (2, 1)
    result = cli("tasks", "show", parent, "--json", "--home", str(home))
    assert json.loads(result.stdout)["progress"]["current"] == {"tool_calls": 0, "tool": None}
    result = cli("tasks", "show", parent, "--home", str(home))
    assert "progress: 0 turns, 0 tool calls; now: 0 tool calls" in result.stdout

    result = cli("tasks", "list", "--tree", "--owner", "cli:alice", "--json", "--home", str(home))
    assert [t["session"] for t in json.loads(result.stdout)["sessions"]] == ["cli:alice"]
    result = cli("tasks", "list", "--tree", "--owner", "cli:alice", "--home", str(home))
    lines = result.stdout.splitlines()
    assert lines[0] == "cli:alice · 1 active, 2 in all"
    assert lines[1].startswith(f"  {parent} explore · running · background · 0 turns")
    assert lines[2].startswith(f"    {child} explore · completed")
    result = cli("tasks", "list", "--tree", "--owner", "bad key", "--home", str(home))
    assert result.exit_code == 1 and "is not a session key" in result.stderr

    client = ControlClient(home)
    with pytest.raises(ControlError) as refused:
        loop_thread.run(client.cancel_task(parent, by="ui:<script>"))
    assert refused.value.status == 400 and _status(home, parent) == "running"
    answer = loop_thread.run(client.cancel_task(parent, by="ui:alice"))
    assert answer == {"cancelled": [parent], "status": "cancelled"}
    shown = loop_thread.run(client.task(parent))
    assert shown["error"] == "cancelled by ui:alice"


def test_doctor_reports_bad_agent_files_and_loads_the_rest(
    daemon: ControlStack, home: Path
) -> None:
    (home / "config.toml").write_text('[provider]\nkind = "scripted"\n')
    agents = home / "workspace" / ".claude" / "agents"
    agents.mkdir(parents=True)
    (agents / "good.md").write_text("---\nname: good\ndescription: fine\n---\nbody\n")
    (agents / "bad.md").write_text("---\nname: bad\ndescription: [oops\ntools: x\n---\n")
    (home / "agents").mkdir()
    (home / "agents" / "mine.md").write_text("---\ndescription: mine\n---\n")
    result = cli("doctor", "--home", str(home))
    assert result.exit_code == 1
    out = " ".join(result.stdout.split())
    assert "✓ custom agents: 2 loaded (good, mine)" in out
    assert f"✗ custom agent file: {agents / 'bad.md'}:4: bad YAML front matter" in out
