"""Hook and MCP files that appear in the workspace start nothing until the operator trusts
them: spawned gateways (restarted), the real CLI, a real ``exec`` and a killed worker.

Every planted file runs a command that leaves a marker file; the marker is the proof
that a process started (or, absent, that none did).
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any

import pytest

from core.trust import TRUST_FILE
from tests.daemon_env import REPO, daemon_env
from tests.e2e.test_daemon_process import Daemon, daemon, fake_openai, write_config
from tests.e2e.test_processes import running
from tests.e2e.test_processes import write_config as write_multi_config
from tests.waiting import eventually

pytestmark = pytest.mark.slow

TIMEOUT = 120.0
NOBODY = 65534
RESTARTS = pytest.mark.timeout(600)
"""Each test starts gateways three or four times: on a loaded 2-core machine that takes
longer than the suite's per-test limit."""


@pytest.fixture
def home() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="fam-", dir="/tmp"))
    try:
        yield path
    finally:
        for folder, dirs, _ in os.walk(path):  # a command made folders read-only
            for name in dirs:
                with suppress(OSError):
                    os.chmod(Path(folder) / name, 0o700)
        shutil.rmtree(path, ignore_errors=True)


def mcp_doc(marker: Path) -> str:
    """An ``mcp.json`` whose one stdio server leaves ``marker`` when it is started."""
    server = {"command": "/bin/sh", "args": ["-c", f"touch {marker}; sleep 30"]}
    return json.dumps({"mcpServers": {"planted": server}})


async def familiar(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The ``familiar`` CLI, run by the operator (root) in a process of its own."""
    return await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "gateway.cli", *args, "--home", str(home)],
        env=daemon_env(), cwd=REPO, capture_output=True, text=True, timeout=TIMEOUT,
    )  # fmt: skip


async def ask(d: Any, text: str, session: str = "cli:trust") -> str:
    """Send ``text`` (``!tool ...``: the fake model calls that tool) and wait for the reply."""
    body = {"session": session, "text": text, "stream": False, "timeout": TIMEOUT}
    async with d._session() as http, http.post("http://familiar/v1/messages", json=body) as r:
        assert r.status == 200, await r.text()
        lines = [json.loads(x) async for x in r.content if x.strip()]
    (reply,) = [line for line in lines if line["type"] == "reply"]
    return str(reply["text"])


TOOL_TURN = '!tool exec {"command": "echo a turn with tools"}'
"""A turn that offers tools (lazy MCP servers start) and runs one (hooks fire)."""


@RESTARTS
async def test_files_written_into_the_workspace_start_nothing_until_trusted(home: Path) -> None:
    ws = home / "workspace"
    hooks = ws / ".github" / "hooks"
    hooks.mkdir(parents=True)
    mcp_mark, hook_mark = home / "mcp-ran", home / "hook-ran"
    (ws / ".mcp.json").write_text(mcp_doc(mcp_mark))
    (ws / "hook.sh").write_text(f"touch {hook_mark}\n")
    doc = {"version": 1, "hooks": {"preToolUse": [{"bash": "sh hook.sh"}]}}
    (hooks / "plant.json").write_text(json.dumps(doc))

    async with fake_openai() as base_url:
        write_config(home, base_url)
        for run in ("first start", "restart"):
            log_file = home / "daemon.log"
            logged = len(log_file.read_text()) if log_file.exists() else 0
            async with daemon(home) as d:
                await d.wait_ready()
                assert "tool said: exit code 0" in await ask(d, TOOL_TURN), run
                await ask(d, TOOL_TURN)
                listed = await familiar(home, "mcp", "list", "--json")
                assert json.loads(listed.stdout)["untrusted"][0]["name"] == "planted"
                assert not mcp_mark.exists() and not hook_mark.exists(), run
                log = d.logs()[logged:]
                assert log.count("workspace MCP file ignored") == 1, log
                assert log.count("workspace hook file ignored") == 1, log
        probed = await familiar(home, "mcp", "list", "--json")  # no gateway: probes here
        assert json.loads(probed.stdout)["servers"] == [] and not mcp_mark.exists()

        trusted = await familiar(home, "trust", "allow", ".mcp.json", ".github/hooks/plant.json")
        assert trusted.returncode == 0, trusted.stderr
        async with daemon(home) as d:
            await d.wait_ready()
            await ask(d, TOOL_TURN)
            await eventually(mcp_mark.exists, timeout=TIMEOUT, what="the trusted server ran")
            assert hook_mark.exists()

        mcp_mark.unlink()
        hook_mark.unlink()
        (ws / "hook.sh").write_text(f"touch {hook_mark}; echo edited\n")
        (ws / ".mcp.json").write_text(mcp_doc(mcp_mark).replace("sleep 30", "sleep 31"))
        async with daemon(home) as d:
            await d.wait_ready()
            await ask(d, TOOL_TURN)
            await ask(d, TOOL_TURN)
            assert not mcp_mark.exists() and not hook_mark.exists()
        states = json.loads((await familiar(home, "trust", "--json")).stdout)["files"]
        assert {f["state"] for f in states} == {"changed"}


class NobodyDaemon(Daemon):
    """The single-process gateway as an unprivileged user (``runuser``), on the system
    Python with this checkout's packages (the venv's interpreter lives under /root)."""

    async def start(self) -> None:
        site = next((REPO / ".venv" / "lib").glob("python3*/site-packages"))
        env = {
            **self.env,
            "HOME": str(self.home),
            "PYTHONPATH": f"{REPO}:{site}",
            "PYTHONDONTWRITEBYTECODE": "1",
        }
        settings = [f"{k}={v}" for k, v in env.items()]
        with self.log.open("ab") as log:
            self.proc = await asyncio.create_subprocess_exec(
                "runuser", "-u", "nobody", "--", "env", "-i", *settings,
                f"/usr/bin/python3.{sys.version_info.minor}", "-m", "gateway.daemon",
                "--home", str(self.home),
                cwd="/", stdout=log, stderr=log,
            )  # fmt: skip
        self.pid: int | None = None

    async def wait_ready(self) -> None:
        await super().wait_ready()
        self.pid = int((await self.get("/v1/status"))["pid"])

    async def kill(self) -> None:  # runuser waits for its child: stop that one
        if self.pid is not None:
            with suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
        await super().kill()


@asynccontextmanager
async def nobody_daemon(home: Path) -> AsyncIterator[NobodyDaemon]:
    d = NobodyDaemon(home, daemon_env(single=True))
    await d.start()
    try:
        yield d
    finally:
        await d.kill()


def _python_for_nobody() -> bool:
    python = Path(f"/usr/bin/python3.{sys.version_info.minor}")
    return python.exists() and shutil.which("runuser") is not None and os.geteuid() == 0


@pytest.mark.skipif(not _python_for_nobody(), reason="needs root, runuser and a system Python")
@RESTARTS
async def test_a_file_planted_by_exec_behind_chmod_555_starts_nothing_until_trusted(
    home: Path,
) -> None:
    """The attack of issue 22: one ``exec`` writes ``.mcp.json`` and ``.vscode/mcp.json``,
    then makes the folders read-only so that nothing can remove them."""
    marker = home / "mcp-ran"
    doc = mcp_doc(marker)
    plant = (
        f"mkdir -p .vscode && printf %s {shlex.quote(doc)} > .mcp.json && "
        "cp .mcp.json .vscode/mcp.json && chmod 555 .vscode; chmod 555 .; echo planted"
    )
    async with fake_openai() as base_url:
        write_config(home, base_url)
        (home / "workspace").mkdir(mode=0o700)
        for path in (home, home / "workspace", home / "config.toml"):
            os.chown(path, NOBODY, NOBODY)
        async with nobody_daemon(home) as d:
            await d.wait_ready()
            reply = await ask(d, "!tool exec " + json.dumps({"command": plant}))
            assert "planted" in reply, reply + d.logs()
        ws = home / "workspace"
        assert (ws / ".mcp.json").read_text() == doc
        assert (ws / ".vscode" / "mcp.json").read_text() == doc
        assert ws.stat().st_mode & 0o777 == 0o555  # the daemon user cannot remove them

        async with nobody_daemon(home) as d:
            await d.wait_ready()
            await ask(d, TOOL_TURN)
            listed = await familiar(home, "mcp", "list")
            assert "untrusted" in listed.stdout and "familiar trust allow" in listed.stderr
            assert not marker.exists(), d.logs()
        await familiar(home, "mcp", "list")
        assert not marker.exists()

        trusted = await familiar(home, "trust", "allow", ".mcp.json", ".vscode/mcp.json")
        assert trusted.returncode == 0, trusted.stderr
        assert (home / TRUST_FILE).stat().st_uid == NOBODY  # the daemon user reads it
        async with nobody_daemon(home) as d:
            await d.wait_ready()
            await ask(d, TOOL_TURN)
            await eventually(marker.exists, timeout=TIMEOUT, what="the trusted server ran")
            assert marker.stat().st_uid == NOBODY


@RESTARTS
async def test_a_file_left_by_a_killed_worker_starts_nothing_until_trusted(home: Path) -> None:
    marker = home / "mcp-ran"
    plant = (
        f"if [ -e .mcp.json ]; then echo exists; else printf %s {shlex.quote(mcp_doc(marker))} "
        "> .mcp.json; sleep 60; fi"
    )
    ws = home / "workspace"
    async with fake_openai() as url:
        write_multi_config(home, url, workers=1)
        async with running(home) as gw:
            await gw.wait_ready()
            await gw.submit("cli:plant", "!tool exec " + json.dumps({"command": plant}))
            await eventually((ws / ".mcp.json").exists, timeout=TIMEOUT, what="planted")
            worker = gw.table()["agent-1"]["pid"]
            os.kill(worker, signal.SIGKILL)  # mid-command: nothing cleans up after it
            await gw.wait_restarted("agent-1", worker)
            await ask(gw, TOOL_TURN)
            assert (ws / ".mcp.json").exists() and not marker.exists(), gw.logs()
            assert await gw.stop() == 0
        async with running(home) as gw:
            await gw.wait_ready()
            await ask(gw, TOOL_TURN)
            assert not marker.exists()
            assert await gw.stop() == 0

        trusted = await familiar(home, "trust", "allow", ".mcp.json")
        assert trusted.returncode == 0, trusted.stderr
        async with running(home) as gw:
            await gw.wait_ready()
            await ask(gw, TOOL_TURN)
            await eventually(marker.exists, timeout=TIMEOUT, what="the trusted server ran")
            assert await gw.stop() == 0
