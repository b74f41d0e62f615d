"""``familiar todos list`` against the real control server; todo events in
``familiar sessions show --events``."""

from __future__ import annotations

import json
from pathlib import Path

from tests.integration.control_stack import ControlStack
from tests.unit.test_cli_client import LoopThread, cli, show
from tests.unit.test_cli_client import daemon as daemon
from tests.unit.test_cli_client import home as home
from tests.unit.test_cli_client import loop_thread as loop_thread


def test_todos_list_shows_each_sessions_todos(
    daemon: ControlStack, home: Path, loop_thread: LoopThread
) -> None:
    assert cli("send", "--session", "alice", "--home", str(home), "hi").exit_code == 0
    orchestration = daemon.core.orchestration
    assert orchestration is not None
    todos = orchestration.todos
    loop_thread.run(todos.add("cli:alice", todo_id="fetch", title="Fetch the data"))
    loop_thread.run(
        todos.add("cli:alice", todo_id="report", title="Write the report", depends_on=["fetch"])
    )
    loop_thread.run(todos.add("cli:bob", todo_id="other", title="Something else"))
    loop_thread.run(todos.set_status("cli:alice", "fetch", "done", result="42 rows"))

    result = cli("todos", "list", "--json", "--home", str(home))
    assert result.exit_code == 0, result.stderr
    listed = json.loads(result.stdout)["todos"]
    assert [(t["session"], t["id"], t["status"]) for t in listed] == [
        ("cli:alice", "fetch", "done"),
        ("cli:alice", "report", "pending"),
        ("cli:bob", "other", "pending"),
    ]
    assert listed[1]["depends_on"] == ["fetch"] and listed[0]["result"] == "42 rows"

    result = cli("todos", "list", "--session", "cli:alice", "--home", str(home))
    assert result.exit_code == 0, result.stderr
    assert "Write the report" in result.stdout and "Something else" not in result.stdout
    assert "fetch" in result.stdout and "pending" in result.stdout

    result = cli("todos", "list", "--session", "cli:nobody", "--home", str(home))
    assert result.exit_code == 0 and result.stdout == "No todos.\n"

    events = [e for e in show(home, "cli:alice")["events"] if e["type"] == "todo.updated"]
    assert [(e["data"]["todo_id"], e["data"]["status"]) for e in events] == [
        ("fetch", "pending"),
        ("report", "pending"),
        ("fetch", "done"),
    ]


def test_todos_list_without_a_gateway_exits_2(home: Path) -> None:
    result = cli("todos", "list", "--home", str(home))
    assert result.exit_code == 2
