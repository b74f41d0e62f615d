"""``exec`` through the exec socket: familiar's client against the real exec server.

A small activator on a loopback Unix socket hands each connection to
``core/tools/exec_server.py`` as systemd would (fd 3, ``LISTEN_FDS=1``, ``LISTEN_PID``),
without the unit's sandbox (tests/integration/test_sandbox_under_units.py has that).
The gateway side is the real `ExecRunner`, told where the socket is by
``FAMILIAR_EXEC_SOCKET`` as the daemon's unit tells it.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import shutil
import socket
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from core.errors import ToolFailed
from core.tools.base import ToolContext
from core.tools.config import ExecConfig
from core.tools.exec import ExecRunner
from core.tools.exec_server import check_request
from core.tools.sandbox import EXEC_SOCKET_ENV
from tests.conftest import short_home
from tests.waiting import eventually

SERVER = Path(__file__).resolve().parents[2] / "core" / "tools" / "exec_server.py"
_HAND_OVER = (
    "import os, sys; os.dup2(int(sys.argv[1]), 3); os.close(int(sys.argv[1])); "
    "os.environ.update(LISTEN_FDS='1', LISTEN_PID=str(os.getpid())); "
    "os.execv(sys.argv[2], sys.argv[2:])"
)
"""What systemd does before it executes an instance: the connection as fd 3."""


class Activator:
    """Accepts on ``path``; each connection goes to a fresh exec server process."""

    def __init__(self, path: Path, workspace: Path, *, network: bool = True) -> None:
        self.path, self.workspace, self.network = path, workspace, network
        self.servers: list[asyncio.subprocess.Process] = []
        self.argv_override: list[str] | None = None

    async def _serve(self, conn: socket.socket) -> None:
        server = [sys.executable, "-I", str(SERVER), "--workspace", str(self.workspace)]
        server += ["--max-timeout", "600", "--network", "on" if self.network else "off"]
        argv = self.argv_override or server
        fd = conn.fileno()
        try:
            proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-c",
                _HAND_OVER,
                str(fd),
                *argv,
                pass_fds=(fd,),
                stdin=asyncio.subprocess.DEVNULL,
            )
        finally:
            conn.close()  # the server holds the connection now
        self.servers.append(proc)

    async def _accept(self, listener: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        while True:
            conn, _ = await loop.sock_accept(listener)
            await self._serve(conn)

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[Activator]:
        # A bare socket, not asyncio's server: nothing may read the request but the server.
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(str(self.path))
        listener.listen()
        listener.setblocking(False)
        accepting = asyncio.create_task(self._accept(listener))
        try:
            yield self
        finally:
            accepting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await accepting
            listener.close()
            for proc in self.servers:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                await proc.wait()


@pytest.fixture
def socket_dir() -> Iterator[Path]:
    path = short_home()  # a Unix socket address is short
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _ctx(workspace: Path) -> ToolContext:
    return ToolContext(workspace=workspace, session_key="slack:C1", channel="slack")


def _runner(monkeypatch: pytest.MonkeyPatch, sock: Path, **config: object) -> ExecRunner:
    monkeypatch.setenv(EXEC_SOCKET_ENV, str(sock))
    return ExecRunner(ExecConfig.model_validate(config))


async def test_a_command_runs_through_the_socket(
    tmp_path: Path, socket_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sock = socket_dir / "exec.sock"
    runner = _runner(monkeypatch, sock)
    async with Activator(sock, tmp_path).running():
        choice = await runner.sandbox()
        assert choice.as_json() == {"name": "systemd", "mode": "auto", "problem": ""}
        result = await runner.run("echo out; echo err >&2; pwd; exit 3", _ctx(tmp_path))
    assert result == f"exit code 3\nout\nerr\n{tmp_path}\n"


async def test_a_missing_socket_is_a_clear_error_not_the_host(
    tmp_path: Path, socket_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner = _runner(monkeypatch, socket_dir / "exec.sock")
    assert "is missing" in (await runner.sandbox()).problem
    marker = tmp_path / "ran"
    with pytest.raises(ToolFailed, match=r"does not answer.*never fall back to the host"):
        await runner.run(f"touch {marker}", _ctx(tmp_path))
    assert not marker.exists()


async def test_the_timeout_kills_the_command(
    tmp_path: Path, socket_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sock = socket_dir / "exec.sock"
    runner = _runner(monkeypatch, sock)
    async with Activator(sock, tmp_path).running():
        with pytest.raises(ToolFailed, match=r"timed out after 1s; output so far:\nbefore"):
            await runner.run("echo before; sleep 30; echo after", _ctx(tmp_path), timeout=1)


async def test_a_cancelled_call_kills_the_command(
    tmp_path: Path, socket_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sock = socket_dir / "exec.sock"
    runner = _runner(monkeypatch, sock)
    marker = f"30.{secrets.randbelow(10**6):06d}"
    started = tmp_path / "started"
    async with Activator(sock, tmp_path).running() as act:
        task = asyncio.create_task(
            runner.run(f"touch {started}; sleep {marker}", _ctx(tmp_path), timeout=20)
        )
        await eventually(started.exists, what="the command started")
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.wait_for(act.servers[0].wait(), 10)  # the instance ended
    await eventually(lambda: _alive(marker) == [], timeout=10, what="the command gone")


async def test_output_after_the_shell_exited_is_drained_for_a_moment_only(
    tmp_path: Path, socket_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A background child that keeps writing once the shell exited neither holds the
    instance until the timeout nor streams on: the exit comes after the drain."""
    sock = socket_dir / "exec.sock"
    runner = _runner(monkeypatch, sock)
    marker = f"drain-{secrets.token_hex(4)}"
    command = f"yes {marker} & echo shell-done"
    async with Activator(sock, tmp_path).running() as act:
        # The guard only ends a hung run: it is ten times the drain, far under the timeout.
        async with asyncio.timeout(30):
            result = await runner.run(command, _ctx(tmp_path), timeout=300)
        await asyncio.wait_for(act.servers[0].wait(), 10)
    assert result.startswith("exit code 0\n") and "shell-done" in result, result[:200]
    # The server SIGKILLed the group on its way out; a killed process leaves /proc a
    # moment later (under load, after the server's own exit was seen).
    await eventually(lambda: _alive(marker) == [], timeout=10, what="the background child gone")


def _alive(marker: str) -> list[Path]:
    """Processes whose command line has ``marker``."""
    return [p for p in Path("/proc").iterdir() if marker.encode() in _cmdline(p)]


def _cmdline(entry: Path) -> bytes:
    if not entry.name.isdigit():
        return b""
    with contextlib.suppress(OSError):
        return (entry / "cmdline").read_bytes()
    return b""


async def test_the_unit_refuses_a_request_it_was_not_rendered_for(
    tmp_path: Path, socket_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sock = socket_dir / "exec.sock"
    runner = _runner(monkeypatch, sock, network=False)
    async with Activator(sock, tmp_path, network=True).running():
        with pytest.raises(ToolFailed, match=r"network on.*run `familiar service install` again"):
            await runner.run("true", _ctx(tmp_path))


async def test_an_instance_that_dies_is_a_clear_error(
    tmp_path: Path, socket_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sock = socket_dir / "exec.sock"
    runner = _runner(monkeypatch, sock)
    activator = Activator(sock, tmp_path)
    activator.argv_override = ["/bin/false"]  # like an instance that fails to start
    async with activator.running():
        with pytest.raises(ToolFailed, match=r"without an exit status.*familiar-exec"):
            await runner.run("true", _ctx(tmp_path))


def test_systemd_is_refused_outside_the_units(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(EXEC_SOCKET_ENV, raising=False)
    runner = ExecRunner(ExecConfig(sandbox="systemd"))
    choice = asyncio.run(runner.sandbox())
    assert choice.sandbox is None and "FAMILIAR_EXEC_SOCKET is not set" in choice.problem


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"cwd": "/etc"}, "outside the workspace"),
        ({"cwd": "{ws}/../x"}, "outside the workspace"),
        ({"timeout": 31}, "outside what this unit allows"),
        ({"env": {"A=B": "c"}}, "env"),
        ({"command": ""}, "no command"),
        ({"network": False}, "network on"),
    ],
)
def test_check_request_refuses(tmp_path: Path, change: dict[str, object], message: str) -> None:
    request: dict[str, object] = {
        "command": "true",
        "cwd": str(tmp_path),
        "timeout": 5,
        "env": {},
        "network": True,
    }
    for key, value in change.items():
        request[key] = value.replace("{ws}", str(tmp_path)) if isinstance(value, str) else value
    with pytest.raises(ValueError, match=message):
        check_request(request, workspace=str(tmp_path), max_timeout=30, network=True)
