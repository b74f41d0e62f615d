"""``familiar tasks list|show|cancel`` against the real control server."""

from __future__ import annotations

import json
from pathlib import Path

from core.tasks.registry import SpawnRequest
from tests.integration.control_stack import ControlStack
from tests.unit.test_cli_client import LoopThread, cli
from tests.unit.test_cli_client import daemon as daemon
from tests.unit.test_cli_client import home as home
from tests.unit.test_cli_client import loop_thread as loop_thread
from tests.waiting import eventually_sync


def _spawn(daemon: ControlStack, loop_thread: LoopThread, prompt: str, owner: str) -> str:
    request = SpawnRequest(
        owner_key=owner,
        owner_depth=0,
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
