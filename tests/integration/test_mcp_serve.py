"""``familiar mcp serve`` driven by the MCP SDK's own ``Client``, over stdio and HTTP."""

from __future__ import annotations

import asyncio
import json
import socket
import sys
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from core.errors import ConfigError
from core.mcp import McpServeConfig
from gateway.mcp.http import http_app, serve_http
from gateway.mcp.server import build_mcp_server
from gateway.version import package_version
from tests.fakes.mcp_procs import ROOT
from tests.integration.control_stack import control_stack

TOKEN = "s3cret-token"


def serve_params(home: Path) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "gateway.cli", "mcp", "serve", "--home", str(home)],
        env={"PYTHONPATH": str(ROOT)},
        cwd=str(ROOT),
    )


def data(result: Any) -> Any:
    assert not result.is_error, result.content
    if result.structured_content is not None:
        return result.structured_content.get("result", result.structured_content)
    return json.loads(result.content[0].text)


async def exercise(client: Client) -> None:
    names = {t.name for t in (await client.list_tools()).tools}
    assert {"send_message", "list_sessions", "read_session", "schedule_add"} <= names
    sent = data(await client.call_tool("send_message", {"text": "hello", "session": "work"}))
    assert (sent["status"], sent["reply"], sent["session"]) == ("done", "echo: hello", "cli:work")
    sessions = data(await client.call_tool("list_sessions", {}))
    assert "cli:work" in [s["key"] for s in sessions]
    read = data(await client.call_tool("read_session", {"key": "cli:work", "limit": 5}))
    assert any("echo: hello" in json.dumps(h) for h in read["history"])
    added = data(
        await client.call_tool(
            "schedule_add", {"spec": "every 5m", "prompt": "check mail", "session": "work"}
        )
    )
    assert (added["kind"], added["session"], added["prompt"]) == ("every", "cli:work", "check mail")
    listed = data(await client.call_tool("schedule_list", {}))
    assert [s["id"] for s in listed] == [added["id"]]
    bad = await client.call_tool("schedule_add", {"spec": "sometimes", "prompt": "x"})
    assert bad.is_error and "every 30m" in bad.content[0].text
    data(await client.call_tool("schedule_cancel", {"id": added["id"]}))
    assert data(await client.call_tool("schedule_list", {})) == []
    assert "tasks_list" in names
    assert data(await client.call_tool("tasks_list", {})) == []  # nothing spawned a subagent
    assert data(await client.call_tool("tasks_list", {"owner": "work"})) == []


@pytest.mark.slow
async def test_stdio_serve_sends_reads_and_schedules_through_the_gateway(tmp_path: Path) -> None:
    async with control_stack(tmp_path) as stack, Client(serve_params(tmp_path)) as client:
        await exercise(client)
        queued = data(
            await client.call_tool(
                "send_message", {"text": "!gate later", "session": "bg", "wait": False}
            )
        )
        assert (queued["status"], queued["session"]) == ("queued", "cli:bg")
        assert queued["message_id"]
        assert await stack.core.bus.message_status(queued["message_id"]) is not None


@pytest.mark.slow
async def test_stdio_serve_without_a_gateway_says_so(tmp_path: Path) -> None:
    async with Client(serve_params(tmp_path)) as client:
        result = await client.call_tool("send_message", {"text": "hello"})
    assert result.is_error and "no familiar gateway is running" in result.content[0].text


@asynccontextmanager
async def http_serve(home: Path) -> AsyncIterator[str]:
    sock = socket.create_server(("127.0.0.1", 0))
    config = McpServeConfig(token=TOKEN, port=0)
    task = asyncio.create_task(serve_http(build_mcp_server(home, config), config, sock=sock))
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_http_serve_with_the_token(tmp_path: Path) -> None:
    async with control_stack(tmp_path), http_serve(tmp_path) as url, AsyncExitStack() as stack:
        http = await stack.enter_async_context(
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"})
        )
        client = await stack.enter_async_context(
            Client(streamable_http_client(url, http_client=http))
        )
        await exercise(client)


async def test_http_serve_refuses_a_missing_or_bad_token(tmp_path: Path) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    headers = {"Accept": "application/json, text/event-stream"}
    async with http_serve(tmp_path) as url, httpx2.AsyncClient() as http:
        missing = await http.post(url, json=body, headers=headers)
        bad = await http.post(url, json=body, headers={**headers, "Authorization": "Bearer x"})
    assert missing.status_code == bad.status_code == 401
    assert missing.headers["www-authenticate"].startswith("Bearer")


def test_http_serve_needs_a_token(tmp_path: Path) -> None:
    config = McpServeConfig()
    with pytest.raises(ConfigError, match=r"mcp\]? ?.*token|token"):
        http_app(build_mcp_server(tmp_path, config), config)


async def test_clients_see_our_version_and_which_tools_only_read(tmp_path: Path) -> None:
    async with http_serve(tmp_path) as url, AsyncExitStack() as stack:
        http = await stack.enter_async_context(
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"})
        )
        client = await stack.enter_async_context(
            Client(streamable_http_client(url, http_client=http))
        )
        info = client.server_info
        tools = {t.name: t.annotations for t in (await client.list_tools()).tools}
    assert info is not None and (info.name, info.version) == ("familiar", package_version())
    assert package_version() != ""
    reads = {n for n, a in tools.items() if a is not None and a.read_only_hint}
    assert reads == {"list_sessions", "read_session", "schedule_list", "tasks_list"}
    for name in tools.keys() - reads:
        annotations = tools[name]
        assert annotations is not None and annotations.read_only_hint is False, name
    cancel = tools["schedule_cancel"]
    assert cancel is not None and cancel.destructive_hint is True
