"""The gateway with MCP servers configured: status, /readyz, doctor, and a model's call."""

from __future__ import annotations

import asyncio
import json
import sys
from contextlib import AsyncExitStack
from pathlib import Path

import aiohttp
import httpx2
import pytest
from click.testing import CliRunner
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from core.errors import ConfigError
from gateway.cli import app
from gateway.commands.doctor import _doctor
from gateway.config import load_config
from tests.fakes.fake_openai import FakeOpenAI, ToolCalls
from tests.fakes.mcp_procs import MODULE, ROOT
from tests.integration.test_daemon import running, write_config
from tests.integration.test_roles import Front, role
from tests.waiting import eventually

TOKEN = "gateway-mcp-token"
SERVERS = f"""
[mcp]
first_turn_wait = 60

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

            async def states() -> dict[str, str]:
                return {s["name"]: s["state"] for s in (await gw.get("/v1/status"))["mcp"]}

            # Lazy (no `eager`): nothing runs until a turn needs the tools ...
            assert await states() == {"fake": "stopped", "broken": "stopped"}
            lines = await gw.send("use the tool")
            assert lines[-1]["text"] == "done"  # ... and that first turn could use them

            async def settled() -> bool:
                return await states() == {"fake": "ready", "broken": "failed"}

            await eventually(settled, timeout=60, what="mcp servers settled")
            status = await gw.get("/v1/status")
            readyz = f"http://{status['http']}/readyz"
            async with aiohttp.ClientSession() as http, http.get(readyz) as response:
                ready = await response.json()
            checks = {c.name: c for c in await _doctor(home)}
            listed = await asyncio.to_thread(
                CliRunner().invoke, app, ["mcp", "list", "--json", "--home", str(home)]
            )
    assert fake.requests[-1]["messages"][-1]["content"] == "via mcp"
    assert ready["status"] == "ready" and "broken" in ready["mcp_failing"]
    assert checks["mcp server fake"].ok and "tools" in checks["mcp server fake"].reason
    assert not checks["mcp server broken"].ok
    assert listed.exit_code == 0, listed.output
    servers = {s["name"]: s for s in json.loads(listed.stdout)["servers"]}
    assert json.loads(listed.stdout)["from"] == "gateway"
    assert servers["fake"]["state"] == "ready" and servers["fake"]["starts"] == 1
    assert "mcp__fake__echo" in servers["fake"]["tools"]
    assert servers["broken"]["state"] == "failed" and servers["broken"]["error"]


@pytest.mark.slow
async def test_the_gateways_mcp_endpoint_needs_the_token_and_drives_the_gateway(
    daemon_home: Path,
) -> None:
    home = daemon_home
    async with FakeOpenAI() as fake:
        write_config(home, fake, f'\n[mcp.server]\nenabled = true\ntoken = "{TOKEN}"\n')
        fake.script("hello from the gateway")
        async with running(home) as gw:
            status = await gw.get("/v1/status")
            url = f"http://{status['http']}/mcp"
            body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
            async with aiohttp.ClientSession() as http:
                for headers in ({}, {"Authorization": "Bearer wrong"}):
                    async with http.post(url, json=body, headers=headers) as response:
                        assert response.status == 401
            async with (
                httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}) as client_http,
                Client(streamable_http_client(url, http_client=client_http)) as client,
            ):
                sent = await client.call_tool("send_message", {"text": "hi", "session": "m"})
                assert not sent.is_error, sent.content
                assert sent.structured_content is not None
                assert sent.structured_content["reply"] == "hello from the gateway"
                listed = await client.call_tool("list_sessions", {})
                assert "cli:m" in json.dumps(listed.structured_content)
                added = await client.call_tool(
                    "schedule_add", {"spec": "after 1h", "prompt": "remind me", "session": "m"}
                )
                assert not added.is_error, added.content
            schedules = await gw.get("/v1/schedules")
    assert [s["prompt"] for s in schedules["schedules"]] == ["remind me"]


def test_enabling_the_endpoint_without_a_token_is_a_config_error(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text("[mcp.server]\nenabled = true\n")
    with pytest.raises(ConfigError, match=r"mcp\.server.*token"):
        load_config(tmp_path)


@pytest.mark.slow
async def test_a_servers_progress_reaches_the_caller_of_the_turn(daemon_home: Path) -> None:
    home = daemon_home
    async with FakeOpenAI() as fake:
        write_config(home, fake, SERVERS)
        fake.script(ToolCalls((("mcp__fake__steps", {"count": 2}),)), "done")
        async with running(home) as gw:
            lines = await gw.send("count for me", stream=True, timeout=60)
    progress = [line["text"] for line in lines if line["type"] == "progress"]
    assert progress == [
        "running mcp__fake__steps…",
        "mcp__fake__steps: step 1 (1/2)",
        "mcp__fake__steps: step 2 (2/2)",
    ]
    assert lines[-1]["text"] == "done"
    assert fake.requests[-1]["messages"][-1]["content"] == "2 steps done"


@pytest.mark.slow
async def test_the_channels_role_shows_the_servers_of_the_agent_role(daemon_home: Path) -> None:
    """Roles run on their own (a unit per role): the agent role's servers, seen by the
    channels role that answers ``status``."""
    home = daemon_home
    eager = SERVERS.replace("[mcp.servers.fake]\n", "[mcp.servers.fake]\neager = true\n")
    eager = eager.replace("[mcp.servers.broken]\n", "[mcp.servers.broken]\neager = true\n")
    async with FakeOpenAI() as fake, AsyncExitStack() as stack:
        write_config(home, fake, eager)
        await stack.enter_async_context(role(home, "channels"))
        connector = aiohttp.UnixConnector(path=str(home / "run" / "gateway.sock"))
        http = await stack.enter_async_context(aiohttp.ClientSession(connector=connector))
        front = Front(http)

        async def answers() -> bool:
            try:
                await front.get("/v1/status")
            except aiohttp.ClientConnectionError:
                return False
            return True

        await eventually(answers, timeout=60, what="the channels role serves")
        assert (await front.get("/v1/status"))["mcp"] == []  # no agent role yet
        await stack.enter_async_context(role(home, "agent"))

        async def settled() -> bool:
            found = {s["name"]: s["state"] for s in (await front.get("/v1/status"))["mcp"]}
            return found == {"fake": "ready", "broken": "failed"}

        await eventually(settled, timeout=60, what="the agent role's servers published")
        servers = {s["name"]: s for s in (await front.get("/v1/status"))["mcp"]}
    assert "mcp__fake__echo" in servers["fake"]["tools"]
    assert "FileNotFoundError" in servers["broken"]["error"]
