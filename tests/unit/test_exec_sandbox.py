"""The exec sandbox with real processes: secrets, home files, writes, kills, network.

The workspace lives inside a fake ``$FAMILIAR_HOME`` holding a ``config.toml`` with a
secret and a ``familiar.db``. Secret-reading probes run in a child Python process whose
*initial* environment holds the keys (as a daemon's would), so ``/proc/<pid>/environ``
really contains them; each check has an unsandboxed control showing the probe can see
what it looks for. Tests needing bubblewrap skip without it, except under CI=true.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import shutil
import signal
import socket
import sys
from pathlib import Path
from typing import Any

import pytest

from core.providers.base import ToolCall
from core.tools import ExecConfig, ToolContext, ToolRegistry, ToolResult, ToolsConfig, exec_tools
from core.tools.sandbox import choose_sandbox
from tests.waiting import eventually

SECRETS = {
    "OPENAI_API_KEY": "sk-openai-" + secrets.token_hex(8),
    "ANTHROPIC_API_KEY": "sk-ant-" + secrets.token_hex(8),
    "FAMILIAR_PROVIDER__API_KEY": "sk-familiar-" + secrets.token_hex(8),
}
CONFIG_SECRET = "sk-in-config-" + secrets.token_hex(8)
DB_SECRET = "row-in-db-" + secrets.token_hex(8)


async def require_bwrap() -> None:
    """Skip (fail under CI=true) when bubblewrap does not work here."""
    problem = (await choose_sandbox(ExecConfig(sandbox="bwrap"))).problem
    if problem:
        reason = f"bubblewrap unusable ({problem}); `make deps-system` installs it"
        if os.environ.get("CI") == "true":
            pytest.fail(reason + "; CI=true requires it")
        pytest.skip(reason)


@pytest.fixture
async def bwrap() -> None:
    await require_bwrap()


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    (home / "workspace").mkdir(parents=True)
    (home / "run").mkdir()
    (home / "config.toml").write_text(f'[provider]\napi_key = "{CONFIG_SECRET}"\n')
    (home / "familiar.db").write_text(DB_SECRET)
    return home


@pytest.fixture
def ctx(home: Path) -> ToolContext:
    return ToolContext(workspace=home / "workspace", session_key="cli:test", channel="cli")


@pytest.fixture
def secret_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)


def registry(**exec_config: Any) -> ToolRegistry:
    return ToolRegistry(tools=exec_tools(ToolsConfig(exec=ExecConfig(**exec_config))))


async def run(reg: ToolRegistry, ctx: ToolContext, command: str, **args: Any) -> ToolResult:
    call = ToolCall(id="c", name="exec", arguments={"command": command, **args})
    return await reg.execute(call, ctx)


_DAEMON = """
import asyncio, json, sys
from pathlib import Path
from core.providers.base import ToolCall
from core.tools import ExecConfig, ToolContext, ToolRegistry, ToolsConfig, exec_tools

async def main() -> None:
    spec = json.loads(sys.argv[1])
    reg = ToolRegistry(tools=exec_tools(ToolsConfig(exec=ExecConfig(**spec["config"]))))
    ctx = ToolContext(workspace=Path(spec["workspace"]), session_key="cli:test")
    out = []
    for command in spec["commands"]:
        call = ToolCall(id="c", name="exec", arguments={"command": command})
        out.append((await reg.execute(call, ctx)).content)
    print(json.dumps(out))

asyncio.run(main())
"""


async def run_in_daemon(workspace: Path, commands: list[str], **exec_config: Any) -> list[str]:
    """Run commands through the exec tool of a child process started with the secrets."""
    spec = json.dumps({"config": exec_config, "workspace": str(workspace), "commands": commands})
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        _DAEMON,
        spec,
        env={**os.environ, **SECRETS},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    result: list[str] = json.loads(out)
    return result


def leaked(text: str) -> list[str]:
    values = [*SECRETS.values(), CONFIG_SECRET, DB_SECRET]
    return [value for value in values if value in text]


SECRET_PROBES = [
    "env",
    "cat /proc/1/environ",
    "cat /proc/$PPID/environ",
    "cat /proc/self/environ",
]


# --- secrets in the environment ------------------------------------------------------


@pytest.mark.usefixtures("bwrap")
async def test_bwrap_commands_cannot_read_the_daemons_secrets(ctx: ToolContext) -> None:
    results = await run_in_daemon(ctx.workspace, SECRET_PROBES, sandbox="bwrap")
    for command, result in zip(SECRET_PROBES, results, strict=True):
        assert result.startswith("exit code 0\n"), (command, result)
        assert leaked(result) == [], (command, result)
    assert f"HOME={ctx.workspace}" in results[0]


async def test_unsandboxed_control_sees_the_parents_environ(ctx: ToolContext) -> None:
    # Shows the probe above can fail: without a sandbox /proc/$PPID is the daemon.
    [env, parent] = await run_in_daemon(
        ctx.workspace, ["env", "cat /proc/$PPID/environ"], sandbox="none"
    )
    assert leaked(env) == []  # the allow-listed environment holds none of them
    assert set(leaked(parent)) == set(SECRETS.values())


@pytest.mark.parametrize("mode", ["none", "bwrap"])
async def test_environment_is_the_allow_list(
    ctx: ToolContext, secret_env: None, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    if mode == "bwrap":
        await require_bwrap()
    monkeypatch.setenv("MY_TOKEN", "passed-through")
    monkeypatch.setenv("OTHER_TOKEN", "kept-back")
    result = await run(registry(sandbox=mode, env_passthrough=["MY_TOKEN"]), ctx, "env")
    names = {line.split("=", 1)[0] for line in result.content.splitlines()[1:] if "=" in line}
    assert names <= {"PATH", "LANG", "TERM", "HOME", "PWD", "MY_TOKEN", "SHLVL", "_", "OLDPWD"}
    assert {"PATH", "HOME", "MY_TOKEN"} <= names
    assert f"HOME={ctx.workspace}" in result.content
    assert "MY_TOKEN=passed-through" in result.content
    assert "kept-back" not in result.content
    assert leaked(result.content) == []


# --- files of the home and the host --------------------------------------------------


@pytest.mark.usefixtures("bwrap")
@pytest.mark.parametrize(
    "command",
    [
        "cat ../config.toml",
        "cat ../familiar.db",
        "cat {home}/config.toml",
        "cat {home}/familiar.db",
        "ls {home}/run",
    ],
)
async def test_bwrap_hides_the_home(ctx: ToolContext, home: Path, command: str) -> None:
    result = await run(registry(sandbox="bwrap"), ctx, command.format(home=home))
    assert not result.content.startswith("exit code 0\n"), result.content
    assert "No such file or directory" in result.content
    assert leaked(result.content) == []


async def test_unsandboxed_control_reads_the_home(ctx: ToolContext) -> None:
    result = await run(registry(sandbox="none"), ctx, "cat ../config.toml ../familiar.db")
    assert set(leaked(result.content)) == {CONFIG_SECRET, DB_SECRET}


@pytest.mark.usefixtures("bwrap")
async def test_bwrap_workspace_is_writable_and_the_rest_is_not_the_host(
    ctx: ToolContext, home: Path
) -> None:
    outside = Path("/tmp") / f"familiar-escape-{secrets.token_hex(6)}"
    command = (
        f"echo a > {outside}; echo b > $HOME/../escaped; echo c > /escaped-root; "
        "echo d > /usr/escaped; echo e > inside; cat inside"
    )
    try:
        result = await run(registry(sandbox="bwrap"), ctx, command)
        assert result.content.endswith("e\n"), result.content
        assert (ctx.workspace / "inside").read_text() == "e\n"
        escapes = [outside, home / "escaped", Path("/escaped-root"), Path("/usr/escaped")]
        assert [path for path in escapes if path.exists()] == []
    finally:
        outside.unlink(missing_ok=True)


# --- every process dies at the timeout ----------------------------------------------


def host_pids(argv: list[str]) -> list[int]:
    """PIDs of host processes whose command line is exactly ``argv``."""
    wanted = ("\0".join(argv) + "\0").encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if (entry / "cmdline").read_bytes() == wanted:
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def gone(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.split(") ")[1].startswith("Z")


def sigkill_pending(pid: int) -> bool:
    """Whether a SIGKILL waits to be delivered to ``pid`` (its thread's or process's)."""
    masks = [
        int(line.split()[1], 16)
        for line in Path(f"/proc/{pid}/status").read_text().splitlines()
        if line.startswith(("SigPnd:", "ShdPnd:"))
    ]
    return any(mask & (1 << (signal.SIGKILL - 1)) for mask in masks)


async def _setsid_sleeper(reg: ToolRegistry, ctx: ToolContext) -> tuple[int, ToolResult]:
    """Start a command leaving a ``setsid`` grandchild; return its host PID and the result."""
    seconds = f"1000.{secrets.randbelow(10**6):06d}"  # unique, to find it on the host
    command = f"setsid sh -c 'sleep {seconds}' & sleep 60"
    task = asyncio.create_task(run(reg, ctx, command, timeout=5))
    found: list[int] = []

    def sleeping() -> bool:
        found[:] = host_pids(["sleep", seconds])
        return bool(found)

    await eventually(sleeping, timeout=10, what="the setsid grandchild runs on the host")
    return found[0], await task


@pytest.mark.usefixtures("bwrap")
async def test_bwrap_timeout_kills_a_setsid_grandchild(ctx: ToolContext) -> None:
    pid, result = await _setsid_sleeper(registry(sandbox="bwrap"), ctx)
    assert result.is_error and "timed out after 5s" in result.content
    await eventually(lambda: gone(pid), timeout=5, what=f"grandchild {pid} is gone")


async def test_unsandboxed_control_setsid_grandchild_survives(ctx: ToolContext) -> None:
    # Shows the check above can fail: a process group kill misses a new session.
    pid, result = await _setsid_sleeper(registry(sandbox="none"), ctx)
    try:
        assert result.is_error
        # The runner's kills are sent before it returns: one that had reached the
        # grandchild would show as a pending SIGKILL (or the process gone).
        assert not gone(pid)
        assert not sigkill_pending(pid)
    finally:
        os.kill(pid, signal.SIGKILL)


@pytest.mark.usefixtures("bwrap")
async def test_bwrap_background_children_end_with_the_command(ctx: ToolContext) -> None:
    seconds = f"1000.{secrets.randbelow(10**6):06d}"
    result = await run(registry(sandbox="bwrap"), ctx, f"setsid sleep {seconds} & echo done")
    assert result.content == "exit code 0\ndone\n"
    await eventually(lambda: not host_pids(["sleep", seconds]), timeout=5, what="sleep gone")


# --- network -------------------------------------------------------------------------


@pytest.mark.usefixtures("bwrap")
@pytest.mark.parametrize("network", [True, False])
async def test_bwrap_network_switch(ctx: ToolContext, network: bool) -> None:
    if shutil.which("python3", path="/usr/bin:/bin") is None:
        pytest.skip("no system python3 to connect with inside the sandbox")
    accepted = asyncio.Event()

    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.set()
        writer.close()

    server = await asyncio.start_server(on_connect, "127.0.0.1", 0, family=socket.AF_INET)
    port = server.sockets[0].getsockname()[1]
    # A script file, not `python3 -c`: inline interpreter code that opens sockets would
    # wait for an approval.
    (ctx.workspace / "probe.py").write_text(
        f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=3)\n"
        "print('connected')\n"
    )
    probe = "python3 probe.py"
    async with server:
        result = await run(registry(sandbox="bwrap", network=network), ctx, probe)
        if network:
            assert result.content == "exit code 0\nconnected\n"
            await asyncio.wait_for(accepted.wait(), 5)
        else:
            assert "connected\n" not in result.content
            assert "ConnectionRefusedError" in result.content
            assert not accepted.is_set()


# --- choosing the sandbox ------------------------------------------------------------


async def test_required_bwrap_missing_is_a_clear_error(
    ctx: ToolContext, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    result = await run(registry(sandbox="bwrap"), ctx, "true")
    assert result.is_error
    assert 'tools.exec.sandbox = "bwrap" but bubblewrap does not work' in result.content
    assert "bwrap (package bubblewrap) is not on PATH" in result.content


async def test_auto_without_bwrap_runs_unsandboxed_with_the_allow_list(
    ctx: ToolContext,
    secret_env: None,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    bin_dir = tmp_path / "bin-without-bwrap"
    bin_dir.mkdir()
    for tool in ("env", "cat"):
        found = shutil.which(tool)
        assert found is not None
        (bin_dir / tool).symlink_to(found)
    monkeypatch.setenv("PATH", str(bin_dir))
    result = await run(registry(), ctx, "env; cat ../config.toml")
    assert result.content.startswith("exit code 0\n")
    assert leaked(result.content) == [CONFIG_SECRET]  # no sandbox: files are readable
    assert "WITHOUT a sandbox" in caplog.text


@pytest.mark.usefixtures("bwrap")
async def test_auto_uses_bwrap_when_it_works(ctx: ToolContext) -> None:
    result = await run(registry(), ctx, "cat ../config.toml")
    assert "No such file or directory" in result.content


@pytest.mark.parametrize("names", [["FAMILIAR_PROVIDER__API_KEY"], ["familiar_x"], ["A-B"], [""]])
def test_env_passthrough_refuses_bad_names(names: list[str]) -> None:
    with pytest.raises(ValueError, match="env_passthrough"):
        ExecConfig(env_passthrough=names)


def test_defaults() -> None:
    config = ExecConfig()
    assert (config.sandbox, config.network, config.env_passthrough) == ("auto", True, [])
