"""The hook process runner: stdin, exit codes, caps, and killing the whole group."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

from core.hooks.process import run_hook_process
from core.tools.sandbox import command_env
from core.trust import WorkspaceTrust
from tests.waiting import eventually


def _sh(script: str) -> tuple[str, ...]:
    return ("/bin/sh", "-c", script)


async def _run(
    tmp_path: Path,
    script: str,
    *,
    payload: bytes = b"{}",
    timeout: float = 30.0,
    max_output: int = 4096,
):  # type: ignore[no-untyped-def]
    return await run_hook_process(
        _sh(script), payload=payload, cwd=tmp_path, env=command_env(tmp_path),
        timeout=timeout, max_output=max_output,
    )  # fmt: skip


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


async def test_payload_in_answer_out_in_the_workspace(tmp_path: Path) -> None:
    run = await _run(tmp_path, 'cat; echo; pwd; echo "$HOME" >&2; exit 2', payload=b'{"a":1}')
    assert run.exit_code == 2 and run.failure is None
    assert run.stdout.decode().splitlines() == ['{"a":1}', str(tmp_path)]
    assert run.stderr.decode().strip() == str(tmp_path)


async def test_a_hook_that_ignores_a_large_payload_is_fine(tmp_path: Path) -> None:
    run = await _run(tmp_path, "exit 0", payload=b"x" * 5_000_000)
    assert run.exit_code == 0 and run.failure is None


async def test_a_timeout_kills_the_group_grandchildren_too(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    run = await _run(tmp_path, f"sleep 600 & echo $! > {pids}; echo $$ >> {pids}; wait", timeout=2)
    assert run.timed_out and run.failure == "timed out after 2 s"
    for pid in map(int, pids.read_text().split()):
        await eventually(lambda pid=pid: _gone(pid), what=f"pid {pid} killed")


async def test_too_much_output_kills_the_hook(tmp_path: Path) -> None:
    run = await _run(tmp_path, "yes >&2", max_output=4096)
    assert run.failure == "wrote more than 4096 bytes to stderr"


async def test_cancelling_kills_the_hook(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    task = asyncio.create_task(_run(tmp_path, f"echo $$ > {pid_file}; exec sleep 600"))
    await eventually(lambda: pid_file.exists() and pid_file.read_text().strip() != "")
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert task.cancelled()
    pid = int(pid_file.read_text())
    await eventually(lambda: _gone(pid), what="the hook was killed")


async def test_a_missing_program_is_a_failure_not_an_exception(tmp_path: Path) -> None:
    run = await run_hook_process(
        ("/nonexistent/hook",), payload=b"", cwd=tmp_path, env={}, timeout=5, max_output=10
    )
    assert run.exit_code is None and run.failure is not None
    assert run.failure.startswith("cannot start")


async def test_a_hook_s_home_is_not_the_agent_writable_workspace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A hook (even one kept outside the workspace) running git anywhere read the
    workspace's .gitconfig as ~/.gitconfig: core.fsmonitor ran the agent's command."""
    import shutil

    from core.hooks import Facts, HookEvent, Hooks, HooksConfig, HookSource

    git = shutil.which("git")
    if git is None:
        pytest.skip("no git")
    real_home = tmp_path / "operator-home"
    real_home.mkdir()
    monkeypatch.setenv("HOME", str(real_home))
    workspace = tmp_path / "ws"
    workspace.mkdir()
    marker = tmp_path / "PWNED"
    (workspace / ".gitconfig").write_text(f'[core]\n\tfsmonitor = "touch {marker}; false"\n')
    repo = tmp_path / "policies"
    init = await asyncio.create_subprocess_exec(git, "init", "-q", str(repo))
    assert await init.wait() == 0
    hooks_dir = tmp_path / "operator-hooks"
    hooks_dir.mkdir()
    command = f"{git} -C {repo} status >/dev/null 2>&1; echo $HOME >&2; exit 0"
    doc = {"version": 1, "hooks": {"preToolUse": [{"type": "command", "bash": command}]}}
    (hooks_dir / "audit.json").write_text(json.dumps(doc))
    hooks = Hooks(
        config=HooksConfig(),
        workspace=workspace,
        sources=[HookSource(hooks_dir, "copilot")],
        trust=WorkspaceTrust(record=None, workspace=workspace),  # hooks_dir is outside it
    )
    facts = Facts(session_key="slack:T1:C1", cwd=str(workspace), tool_name="exec")
    outcome = await hooks.fire(HookEvent.PRE_TOOL_USE, facts, subject="exec")
    assert outcome.ran == 1 and outcome.block is None, outcome
    assert not marker.exists()
