"""The gateway with MCP servers configured: status, /readyz, doctor, and a model's call."""

from __future__ import annotations

import sys
from pathlib import Path

import aiohttp
import pytest

from gateway.commands.doctor import _doctor
from tests.fakes.fake_openai import FakeOpenAI, ToolCalls
from tests.fakes.mcp_procs import MODULE, ROOT
from tests.integration.test_daemon import running, write_config
from tests.waiting import eventually

SERVERS = f"""
[mcp.servers.fake]
command = "{sys.executable}"
args = ["-m", "{MODULE}"]
cwd = "{ROOT}"
env = {{ PYTHONPATH = "{ROOT}" }}

[mcp.servers.broken]
command = "/nonexistent/mcp-server"
"""


@pytest.fixture(autouse=True)
def _restore_logging(restore_root_logging: None) -> None:
    """The daemon runs in-process."""


@pytest.mark.slow
async def test_gateway_offers_mcp_tools_and_reports_broken_servers(daemon_home: Path) -> None:
    home = daemon_home
    async with FakeOpenAI() as fake:
        write_config(home, fake, SERVERS)
        fake.script(ToolCalls((("mcp__fake__echo", {"text": "via mcp"}),)), "done")
        async with running(home) as gw:

            async def settled() -> bool:
                states = {s["name"]: s["state"] for s in (await gw.get("/v1/status"))["mcp"]}
                return states == {"fake": "ready", "broken": "failed"}

            await eventually(settled, timeout=60, what="mcp servers settled")
            lines = await gw.send("use the tool")
            assert lines[-1]["text"] == "done"
            status = await gw.get("/v1/status")
            readyz = f"http://{status['http']}/readyz"
            async with aiohttp.ClientSession() as http, http.get(readyz) as response:
                ready = await response.json()
            checks = {c.name: c for c in await _doctor(home)}
    assert fake.requests[-1]["messages"][-1]["content"] == "via mcp"
    assert ready["status"] == "ready" and "broken" in ready["mcp_failing"]
    assert checks["mcp server fake"].ok and "tools" in checks["mcp server fake"].reason
    assert not checks["mcp server broken"].ok
