"""Without a working sandbox, ``exec`` runs only for conversations the local CLI started.

bubblewrap is made unavailable the way it is on a host without it: ``bwrap`` is not on
``PATH``. Subagent chains are real task rows in a real store, read into the tool
context's lineage the way the turn does (`SubagentProfiles.lineage`).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from core.errors import ToolFailed
from core.messages import Delivery
from core.store.engine import Store
from core.tasks.catalog import AgentCatalog
from core.tasks.profiles import SubagentProfiles
from core.tasks.repository import TaskRepository
from core.tools import ExecConfig, ToolContext, ToolsConfig, exec_tools
from core.tools.exec import ExecRunner
from core.tools.lineage import Lineage


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


async def _subagent_ctx(tmp_path: Path, store: Store, key: str) -> ToolContext:
    repo = TaskRepository(store=store)
    task = await repo.by_child_key(key)
    assert task is not None
    lineage = await SubagentProfiles(repo=repo, catalog=AgentCatalog()).lineage(task)
    assert isinstance(lineage, Lineage)
    return ToolContext(workspace=tmp_path, session_key=key, channel="subagent", lineage=lineage)


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
    runner = ExecRunner(ExecConfig())
    # slack -> child -> grandchild: refused at every depth
    slack_child = await _task(store, "s1", "slack:T1:C2:1.5", "slack")
    grandchild = await _task(store, "s2", slack_child, "subagent")
    for key in (slack_child, grandchild):
        with pytest.raises(ToolFailed, match="started on 'slack'"):
            await runner.run("echo ran", await _subagent_ctx(tmp_path, store, key))
    # cli -> child -> grandchild: runs
    cli_child = await _task(store, "c1", "cli:default", "cli")
    cli_grandchild = await _task(store, "c2", cli_child, "subagent")
    for key in (cli_child, cli_grandchild):
        ctx = await _subagent_ctx(tmp_path, store, key)
        assert await runner.run("echo ran", ctx) == "exit code 0\nran\n"
    # a subagent without its lineage (no record was found) never counts as local
    with pytest.raises(ToolFailed, match="exec is refused"):
        await runner.run("echo ran", _ctx(tmp_path, "subagent:gone", "subagent"))
    # a loop in the records never counts as local
    await _task(store, "l1", "subagent:l2", "subagent")
    await _task(store, "l2", "subagent:l1", "subagent")
    with pytest.raises(ToolFailed, match="exec is refused"):
        await runner.run("echo ran", await _subagent_ctx(tmp_path, store, "subagent:l1"))


@pytest.mark.usefixtures("no_bwrap")
async def test_the_refusal_comes_before_an_approval_is_asked(tmp_path: Path) -> None:
    (tool,) = exec_tools(ToolsConfig())
    ctx = _ctx(tmp_path, "slack:T1:C2:1.5", "slack")
    with pytest.raises(ToolFailed, match="exec is refused"):
        await tool.run(ctx, {"command": "rm -rf /"})  # a danger pattern: would ask


def test_only_a_cli_session_on_the_cli_channel_is_local() -> None:
    assert Lineage("cli:work", "cli").root_is_local_cli
    assert not Lineage("slack:T:C", "cli").root_is_local_cli
    assert not Lineage("cli:work", "webhook").root_is_local_cli
