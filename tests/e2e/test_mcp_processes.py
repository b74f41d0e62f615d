"""MCP in the default multi-process gateway, for real: the servers run in the agent
workers, and ``familiar mcp list``, ``status`` and ``doctor`` show them from there."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.daemon_env import REPO, daemon_env
from tests.e2e.test_daemon_process import fake_openai
from tests.e2e.test_processes import running, write_config
from tests.fakes.mcp_procs import MODULE, ROOT
from tests.waiting import eventually

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

TIMEOUT = 120.0


@pytest.fixture
def home() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="fam-", dir="/tmp"))  # short: a socket lives here
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


async def familiar(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The ``familiar`` CLI in a process of its own, as an operator runs it."""
    return await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "gateway.cli", *args, "--home", str(home)],
        env=daemon_env(), cwd=REPO, capture_output=True, text=True, timeout=TIMEOUT,
    )  # fmt: skip


def servers_section(starts: Path) -> str:
    fake = (
        f'command = "{sys.executable}"\nargs = ["-m", "{MODULE}"]\ncwd = "{ROOT}"\n'
        f'env = {{ PYTHONPATH = "{ROOT}", FAKE_MCP_STARTS = "{starts}" }}\neager = true\n'
    )
    failing = "echo 'npm ERR! code SELF_SIGNED_CERT_IN_CHAIN' >&2; exit 7"
    return (
        "\n[mcp]\nreload_interval = 0.2\nrestart_backoff = 30\n\n"
        f"[mcp.servers.fake]\n{fake}\n"
        f'[mcp.servers.npx]\ncommand = "/bin/sh"\nargs = ["-c", "{failing}"]\neager = true\n'
    )


async def listed(home: Path) -> dict[str, Any]:
    done = await familiar(home, "mcp", "list", "--json")
    assert done.returncode == 0, done.stderr
    body: dict[str, Any] = json.loads(done.stdout)
    return body


async def test_mcp_list_status_and_doctor_show_the_agent_workers_servers(home: Path) -> None:
    starts = home / "starts"
    async with fake_openai() as base_url:
        write_config(home, base_url, workers=2, extra=servers_section(starts))
        async with running(home) as gw:
            await gw.wait_ready()

            async def settled() -> bool:
                states = {s["name"]: s["state"] for s in (await listed(home))["servers"]}
                return states == {"fake": "ready", "npx": "failed"}

            await eventually(settled, timeout=TIMEOUT, interval=0.5, what="servers settled")
            assert len(starts.read_text().split()) == 2  # one per agent worker
            body = await listed(home)
            assert body["from"] == "gateway"
            by_name = {s["name"]: s for s in body["servers"]}
            fake = by_name["fake"]
            assert sorted(p["process"] for p in fake["processes"]) == ["agent-1", "agent-2"]
            assert "mcp__fake__echo" in fake["tools"]
            npx = by_name["npx"]
            assert npx["error"] == "exited with status 7 during start-up"
            assert npx["exit_status"] == 7
            assert npx["stderr"] == "npm ERR! code SELF_SIGNED_CERT_IN_CHAIN"

            table = await familiar(home, "mcp", "list")
            assert "MCP (gateway)" in table.stdout and "SELF_SIGNED_CERT_IN_CHAIN" in table.stdout
            status = await familiar(home, "status", "--json")
            assert {s["name"] for s in json.loads(status.stdout)["mcp"]} == {"fake", "npx"}
            doctor = await familiar(home, "doctor")
            assert "mcp server fake" in doctor.stdout
            npx_line = next(x for x in doctor.stdout.splitlines() if "mcp server npx" in x)
            assert "exited with status 7" in npx_line and "SELF_SIGNED" in npx_line
            assert len(starts.read_text().split()) == 2  # the CLI started no copy of its own

            added = {"command": sys.executable, "args": ["-m", MODULE], "cwd": str(ROOT)}
            (home / "mcp.json").write_text(json.dumps({"mcpServers": {"added": added}}))

            async def reloaded() -> bool:
                found = {s["name"]: s for s in (await listed(home))["servers"]}.get("added")
                return found is not None and len(found["processes"]) == 2

            await eventually(reloaded, timeout=TIMEOUT, interval=0.5, what="both workers reloaded")
            log = gw.logs()
    assert log.count("mcp server added added") == 2, log  # one line per worker
