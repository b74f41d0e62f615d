"""The exec tool with real subprocesses: exit codes, output cap, timeouts, the approval gate.

Tests that read ``$!`` compare it with host PIDs, so they run without a sandbox (in
bubblewrap ``$!`` is a PID of the sandbox's own namespace); test_exec_sandbox.py covers
the same kills inside bubblewrap through the host process table.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from core.providers.base import ToolCall
from core.tools import ExecConfig, ToolContext, ToolRegistry, ToolResult, ToolsConfig, exec_tools
from tests.waiting import eventually


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    return ToolContext(workspace=tmp_path, session_key="cli:test", channel="cli")


def make_registry(**exec_config: Any) -> ToolRegistry:
    return ToolRegistry(tools=exec_tools(ToolsConfig(exec=ExecConfig(**exec_config))))


async def run(registry: ToolRegistry, ctx: ToolContext, **args: Any) -> ToolResult:
    return await registry.execute(ToolCall(id="c", name="exec", arguments=args), ctx)


def process_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:  # a zombie waiting to be reaped by init is gone for our purposes
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1].startswith("Z")
    except (FileNotFoundError, IndexError):
        return True


async def wait_gone(pid: int, within: float = 5.0) -> None:
    await eventually(lambda: process_gone(pid), timeout=within, what=f"process {pid} is gone")


def test_schema() -> None:
    [spec] = make_registry().specs()
    assert spec.name == "exec"
    assert list(spec.parameters["properties"]) == ["command", "timeout"]
    assert spec.parameters["required"] == ["command"]
    assert "60s" in spec.description


def test_disabled_exec_has_no_tool() -> None:
    assert exec_tools(ToolsConfig(exec=ExecConfig(enabled=False))) == []


async def test_success_runs_in_workspace(ctx: ToolContext) -> None:
    (ctx.workspace / "marker.txt").write_text("here")
    result = await run(make_registry(), ctx, command="cat marker.txt; echo; pwd")
    assert not result.is_error
    assert result.content == f"exit code 0\nhere\n{ctx.workspace}\n"


async def test_exit_code_and_stderr(ctx: ToolContext) -> None:
    result = await run(make_registry(), ctx, command="echo out; echo err >&2; exit 3")
    assert not result.is_error
    assert result.content == "exit code 3\nout\nerr\n"


async def test_stdin_is_empty_and_no_output(ctx: ToolContext) -> None:
    result = await run(make_registry(), ctx, command="cat")
    assert result.content == "exit code 0\n(no output)"


async def test_daemon_settings_are_not_inherited(
    ctx: ToolContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAMILIAR_PROVIDER__API_KEY", "sk-secret")
    result = await run(make_registry(), ctx, command="env")
    assert "sk-secret" not in result.content


async def test_output_is_capped_head_and_tail(ctx: ToolContext) -> None:
    result = await run(make_registry(max_output=100), ctx, command="seq 1 10000")
    assert not result.is_error
    body = result.content.removeprefix("exit code 0\n")
    full = "".join(f"{i}\n" for i in range(1, 10001))
    marker = f"\n[... {len(full) - 100} chars truncated ...]\n"
    assert body == full[:50] + marker + full[-50:]


async def test_timeout_kills_the_process_group(ctx: ToolContext) -> None:
    command = "sleep 30 & echo $! > child.pid; echo started; wait"
    started = time.monotonic()
    result = await run(make_registry(sandbox="none"), ctx, command=command, timeout=0.5)
    assert time.monotonic() - started < 5
    assert result.is_error
    assert "command timed out after 0.5s" in result.content
    assert "started" in result.content
    child = int((ctx.workspace / "child.pid").read_text())
    await wait_gone(child)  # the child sleep did not survive the timeout


async def test_background_child_does_not_hold_the_call(ctx: ToolContext) -> None:
    # setsid puts the child outside the command's process group, still holding stdout.
    command = "setsid sleep 30 & echo $! > bg.pid; echo done"
    started = time.monotonic()
    try:
        result = await run(make_registry(sandbox="none"), ctx, command=command, timeout=20)
    finally:
        pid = int((ctx.workspace / "bg.pid").read_text())
        os.kill(pid, signal.SIGKILL)
    assert time.monotonic() - started < 5
    assert result.content == "exit code 0\ndone\n"


async def test_default_timeout_from_config(ctx: ToolContext) -> None:
    result = await run(make_registry(timeout=0.3), ctx, command="sleep 10")
    assert result.is_error
    assert "timed out after 0.3s" in result.content


@pytest.mark.parametrize("limit", [0, -1, 601])
async def test_timeout_out_of_range(ctx: ToolContext, limit: float) -> None:
    result = await run(make_registry(), ctx, command="true", timeout=limit)
    assert result.is_error
    assert "at most 600 seconds" in result.content


@pytest.mark.parametrize(
    "command",
    [
        "rm -rf /",
        "rm -rf /*",
        "sudo rm -fr ~",
        "mkfs.ext4 /dev/sda1",
        "dd if=/dev/zero of=/dev/sda bs=1M",
        "echo x; shutdown -h now",
        "reboot",
        ":(){ :|:& };:",
        "chmod -R 777 /",
    ],
)
async def test_dangerous_commands_are_refused_without_an_approval_gate(
    ctx: ToolContext, command: str
) -> None:
    result = await run(make_registry(), ctx, command=command)
    assert result.is_error
    assert "command refused: it " in result.content
    assert "no one can approve it here (tools.exec.approval)" in result.content


@pytest.mark.parametrize(
    "command",
    ["rm -rf build/", "rm -rf /tmp/x", "dd if=a of=b", "grep reboot log.txt", "chmod 644 f"],
)
async def test_harmless_commands_pass_danger_patterns(ctx: ToolContext, command: str) -> None:
    result = await run(make_registry(), ctx, command=command)
    assert "command refused" not in result.content


async def test_custom_deny_pattern_refuses_even_with_approval_never(ctx: ToolContext) -> None:
    registry = make_registry(deny_patterns=[r"\bcurl\b"], approval="never")
    result = await run(registry, ctx, command="'cu'rl x")  # matched after normalising
    assert result.is_error
    assert "deny pattern '\\\\bcurl\\\\b'" in result.content
    assert "tools.exec.deny_patterns" in result.content


async def test_approval_never_runs_a_dangerous_command(
    ctx: ToolContext, caplog: pytest.LogCaptureFixture
) -> None:
    registry = make_registry(approval="never")
    result = await run(registry, ctx, command="echo ZWNobyBoaQ== | base64 -d | sh")
    assert result.content == "exit code 0\nhi\n"
    assert "running a dangerous command" in caplog.text


async def test_approval_always_gates_every_command(ctx: ToolContext) -> None:
    result = await run(make_registry(approval="always"), ctx, command="echo hi")
    assert result.is_error
    assert 'tools.exec.approval is "always"' in result.content


async def test_cancel_kills_the_command(ctx: ToolContext) -> None:
    registry = make_registry(sandbox="none")
    task = asyncio.create_task(run(registry, ctx, command="sleep 30 & echo $! > child.pid; wait"))
    pid_file = ctx.workspace / "child.pid"
    await eventually(
        lambda: pid_file.exists() and pid_file.read_text().strip().isdigit(),
        timeout=10,
        what="the command wrote its child's pid",
    )
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await wait_gone(int(pid_file.read_text()))


async def test_missing_workspace_is_an_error_result(tmp_path: Path) -> None:
    ctx = ToolContext(workspace=tmp_path / "missing", session_key="cli:test")
    result = await run(make_registry(), ctx, command="true")
    assert result.is_error
    assert "cannot start the command" in result.content
