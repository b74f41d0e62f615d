"""``familiar memory list|search|scopes|forget`` against the real control server."""

from __future__ import annotations

import json
from pathlib import Path

from core.memory import Caller
from tests.integration.control_stack import ControlStack
from tests.unit.test_cli_client import (
    LoopThread,
    cli,
)
from tests.unit.test_cli_client import daemon as daemon
from tests.unit.test_cli_client import home as home
from tests.unit.test_cli_client import loop_thread as loop_thread


def seed(daemon: ControlStack, loop_thread: LoopThread) -> list[int]:
    memory = daemon.core.memory
    ids = []
    for key, text, scope in [
        ("cli:alice", "alice parks in bay 12", "session"),
        ("cli:bob", "bob parks in bay 40", "session"),
        ("cli:alice", "the garage closes at midnight", "global"),
    ]:
        entry = loop_thread.run(memory.remember(Caller(key), text, scope=scope))
        ids.append(entry.id)
    return ids


def test_list_search_forget(daemon: ControlStack, home: Path, loop_thread: LoopThread) -> None:
    alice, bob, shared = seed(daemon, loop_thread)
    result = cli("memory", "list", "--json", "--home", str(home))
    assert result.exit_code == 0, result.stderr
    listed = json.loads(result.stdout)["entries"]
    assert {e["id"] for e in listed} >= {alice, bob, shared}
    result = cli("memory", "list", "--scope", "cli:bob", "--json", "--home", str(home))
    assert [e["id"] for e in json.loads(result.stdout)["entries"]] == [bob]
    result = cli("memory", "search", "parks bay", "--json", "--home", str(home))
    assert {e["id"] for e in json.loads(result.stdout)["entries"]} == {alice, bob}
    result = cli("memory", "search", "garage", "--scope", "global", "--home", str(home))
    assert result.exit_code == 0 and "midnight" in result.stdout
    result = cli("memory", "forget", f"#{bob}", "--home", str(home))
    assert result.exit_code == 0 and f"Forgot #{bob}" in result.stdout
    result = cli("memory", "forget", str(bob), "--home", str(home))
    assert result.exit_code == 1 and f"no memory #{bob}" in result.stderr


def test_scopes_count_entries_newest_first(
    daemon: ControlStack, home: Path, loop_thread: LoopThread
) -> None:
    result = cli("memory", "scopes", "--home", str(home))
    assert result.exit_code == 0 and "No memories yet." in result.stdout
    seed(daemon, loop_thread)
    result = cli("memory", "scopes", "--json", "--home", str(home))
    assert result.exit_code == 0, result.stderr
    scopes = json.loads(result.stdout)["scopes"]
    assert {(s["scope"], s["entries"]) for s in scopes} == {
        ("global", 1),
        ("cli:bob", 1),
        ("cli:alice", 1),
    }
    stamps = [s["updated_at"] for s in scopes]
    assert stamps == sorted(stamps, reverse=True)
    result = cli("memory", "scopes", "--home", str(home))
    assert result.exit_code == 0 and "cli:alice" in result.stdout and "global" in result.stdout


def test_bad_input_is_a_clear_message(daemon: ControlStack, home: Path) -> None:
    result = cli("memory", "search", '"* ()', "--home", str(home))
    assert result.exit_code == 1 and "no words" in result.stderr
    result = cli("memory", "forget", "abc", "--home", str(home))
    assert result.exit_code == 64 and "not a memory id" in result.stderr
    for huge in ("99999999999", "9" * 40):  # past a 32-bit id: not found, no SQL error
        result = cli("memory", "forget", huge, "--home", str(home))
        assert result.exit_code == 1 and "no memory" in result.stderr, result.stderr
    result = cli("memory", "list", "--home", str(home))
    assert result.exit_code == 0


def test_no_daemon(tmp_path: Path) -> None:
    result = cli("memory", "list", "--home", str(tmp_path))
    assert result.exit_code == 2 and "no familiar gateway is running" in result.stderr
