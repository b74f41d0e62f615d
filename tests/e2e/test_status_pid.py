"""``familiar status`` names the pid that stops the whole gateway, and lists the supervisor.

``kill $(familiar status --json | jq .pid)`` must stop every process of the gateway, in
the multi-process mode (the supervisor's pid) as in the single one (the process's own).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.daemon_env import REPO, daemon_env
from tests.e2e.test_daemon_process import fake_openai
from tests.e2e.test_processes import TIMEOUT, Gateway, _alive, running, write_config
from tests.e2e.test_processes import home as home
from tests.waiting import eventually

pytestmark = pytest.mark.slow


async def familiar(home: Path, *args: str) -> str:
    """Run the ``familiar`` CLI in a process of its own; its stdout."""
    done = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "gateway.cli", *args, "--home", str(home)],
        capture_output=True, text=True, env=daemon_env(), cwd=REPO, timeout=TIMEOUT,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout


async def _serving(gw: Gateway) -> bool:
    assert gw.alive, gw.logs()
    try:
        await gw.get("/v1/status")
    except (OSError, AssertionError):
        return False
    return True


async def test_the_status_pid_is_the_supervisors_and_kill_stops_every_process(
    home: Path,
) -> None:
    async with fake_openai() as url:
        write_config(home, url, workers=1)
        async with running(home) as gw:
            await gw.wait_ready()
            assert gw.proc is not None
            status: dict[str, Any] = json.loads(await familiar(home, "status", "--json"))
            assert status["pid"] == gw.proc.pid
            rows = {p["name"]: p for p in status["processes"]}
            assert rows["supervisor"]["role"] == "supervisor"
            assert rows["supervisor"]["pid"] == gw.proc.pid
            assert rows["supervisor"]["state"] == "running"
            assert status["processes"][0]["name"] == "supervisor"
            assert rows["channels"]["pid"] != gw.proc.pid

            text = await familiar(home, "status")
            assert re.search(rf"^gateway +pid {gw.proc.pid},", text, re.MULTILINE), text
            assert re.search(rf"^process supervisor +running pid {gw.proc.pid},", text, re.M)

            pids = [p["pid"] for p in status["processes"]]
            os.kill(status["pid"], signal.SIGTERM)  # kill $(familiar status --json | jq .pid)
            assert await asyncio.wait_for(gw.proc.wait(), TIMEOUT) == 0
            assert not any(_alive(pid) for pid in pids)
            assert {p["state"] for p in gw.table().values()} == {"stopped"}


async def test_in_single_mode_the_status_pid_is_the_gateways_own(home: Path) -> None:
    async with fake_openai() as url:
        write_config(home, url, processes="single")
        async with running(home) as gw:
            assert gw.proc is not None
            await eventually(lambda: _serving(gw), timeout=TIMEOUT, what="the gateway serving")
            status: dict[str, Any] = json.loads(await familiar(home, "status", "--json"))
            assert status["pid"] == gw.proc.pid
            assert [(p["role"], p["pid"]) for p in status["processes"]] == [("single", gw.proc.pid)]
            os.kill(status["pid"], signal.SIGTERM)
            assert await asyncio.wait_for(gw.proc.wait(), TIMEOUT) == 0
