"""Without a working sandbox, ``exec`` runs only for conversations the local CLI started.

bubblewrap is made unavailable the way it is on a host without it: ``bwrap`` is not on
``PATH``. Subagent chains are real task rows in a real store; the root lookup is the
one the gateway wires (`TaskRoots`).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from core.errors import ToolFailed
from core.messages import Delivery
from core.store.engine import Store
from core.tasks.repository import TaskRepository
from core.tasks.roots import TaskRoots
from core.tools import ExecConfig, ToolContext, ToolsConfig, exec_tools
from core.tools.exec import ExecRunner
from core.tools.origin import SessionRoot, is_local


@pytest.fixture
def no_bwrap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))


async def _task(store: Store, task_id: str, owner: str, parent_channel: str) -> str:
    child = f"subagent:{task_id}"
    now = time.time()
    values = {
        "id": task_id,
        "owner_key": owner,
        "child_key": child,
        "agent_type": "task",
        "description": "",
        "prompt": "do it",
        "mode": "sync",
        "memory_mode": "isolated",
        "status": "running",
        "depth": 1,
        "delivery": Delivery(channel=parent_channel, chat_id="x").model_dump_json(),
        "created_at": now,
        "updated_at": now,
    }
    await store.transact(lambda conn: TaskRepository.insert_in(conn, values))
    return child


def _ctx(tmp_path: Path, key: str, channel: str) -> ToolContext:
    return ToolContext(workspace=tmp_path, session_key=key, channel=channel)


@pytest.mark.usefixtures("no_bwrap")
@pytest.mark.parametrize(
    ("key", "channel"),
    [
        ("slack:T1:C2:1.5", "slack"),
        ("teams:abc", "teams"),
        ("webhook:ci:default", "webhook"),
        ("heartbeat:main", "heartbeat"),
        ("cli:default", "heartbeat"),  # a heartbeat pointed at a CLI session
        ("subagent:unknown", "subagent"),  # no record: not trusted
    ],
)
async def test_exec_is_refused_off_the_cli_without_a_sandbox(
    tmp_path: Path, key: str, channel: str
) -> None:
    runner = ExecRunner(ExecConfig())
    with pytest.raises(ToolFailed) as info:
        await runner.run("echo ran", _ctx(tmp_path, key, channel))
    message = str(info.value)
    assert "exec is refused" in message and repr(channel) in message
    assert 'tools.exec.sandbox = "none"' in message
    assert "bwrap (package bubblewrap) is not on PATH" in message


@pytest.mark.usefixtures("no_bwrap")
async def test_the_local_cli_keeps_running_commands_without_a_sandbox(tmp_path: Path) -> None:
    runner = ExecRunner(ExecConfig())
    assert (
        await runner.run("echo ran", _ctx(tmp_path, "cli:default", "cli")) == "exit code 0\nran\n"
    )
    choice = await runner.sandbox()
    assert choice.sandbox is not None and choice.sandbox.name == "none" and choice.problem


@pytest.mark.usefixtures("no_bwrap")
async def test_an_explicit_none_runs_commands_from_every_channel(tmp_path: Path) -> None:
    runner = ExecRunner(ExecConfig(sandbox="none"))
    ctx = _ctx(tmp_path, "webhook:ci:default", "webhook")
    assert await runner.run("echo ran", ctx) == "exit code 0\nran\n"


@pytest.mark.usefixtures("no_bwrap")
async def test_subagents_inherit_the_channel_their_chain_started_on(
    tmp_path: Path, store: Store
) -> None:
    runner = ExecRunner(ExecConfig(), roots=TaskRoots(TaskRepository(store=store)))
    # slack -> child -> grandchild: refused at every depth
    slack_child = await _task(store, "s1", "slack:T1:C2:1.5", "slack")
    grandchild = await _task(store, "s2", slack_child, "subagent")
    for key in (slack_child, grandchild):
        with pytest.raises(ToolFailed, match="started on 'slack'"):
            await runner.run("echo ran", _ctx(tmp_path, key, "subagent"))
    # cli -> child -> grandchild: runs
    cli_child = await _task(store, "c1", "cli:default", "cli")
    cli_grandchild = await _task(store, "c2", cli_child, "subagent")
    for key in (cli_child, cli_grandchild):
        assert await runner.run("echo ran", _ctx(tmp_path, key, "subagent")) == (
            "exit code 0\nran\n"
        )
    # a loop in the records never counts as local
    await _task(store, "l1", "subagent:l2", "subagent")
    await _task(store, "l2", "subagent:l1", "subagent")
    with pytest.raises(ToolFailed, match="exec is refused"):
        await runner.run("echo ran", _ctx(tmp_path, "subagent:l1", "subagent"))


@pytest.mark.usefixtures("no_bwrap")
async def test_the_refusal_comes_before_an_approval_is_asked(tmp_path: Path) -> None:
    (tool,) = exec_tools(ToolsConfig())
    ctx = _ctx(tmp_path, "slack:T1:C2:1.5", "slack")
    with pytest.raises(ToolFailed, match="exec is refused"):
        await tool.run(ctx, {"command": "rm -rf /"})  # a danger pattern: would ask


def test_only_a_cli_session_on_the_cli_channel_is_local() -> None:
    assert is_local(SessionRoot("cli:work", "cli"))
    assert not is_local(SessionRoot("slack:T:C", "cli"))
    assert not is_local(SessionRoot("cli:work", "webhook"))
