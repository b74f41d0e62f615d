"""MCP servers that fail, crash, change and report progress, against real subprocesses."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from core.bus.ephemeral import EphemeralHub
from core.mcp import McpConfig, McpServerConfig
from core.mcp.manager import McpManager
from core.messages import Delivery, InboundMessage, Progress
from core.providers.base import ToolCall
from core.tools.base import ToolContext, ToolDeps
from core.tools.registry import ToolRegistry
from tests.fakes.mcp_procs import stdio_server
from tests.waiting import eventually

SECRET = "sk-mcp-secret-abcdef"
FAILING = (
    "echo 'npm warn using --force' >&2; "
    'echo "npm ERR! code SELF_SIGNED_CERT_IN_CHAIN (token $API_TOKEN)" >&2; '
    "echo 'npm ERR! request to https://registry.npmjs.org/x?key=abc failed' >&2; exit 7"
)


@asynccontextmanager
async def managed(
    tmp_path: Path,
    config: McpConfig,
    *,
    every: bool = True,
    registry: ToolRegistry | None = None,
) -> AsyncIterator[McpManager]:
    registry = ToolRegistry() if registry is None else registry
    mgr = McpManager(config=config, registry=registry, cwd=tmp_path)
    mgr.start(every=every)
    try:
        yield mgr
    finally:
        await mgr.stop()


def failing(**overrides: object) -> McpServerConfig:
    return McpServerConfig(
        command="/bin/sh", args=["-c", FAILING], env={"API_TOKEN": SECRET}, **overrides
    )


async def test_a_server_that_exits_while_starting_reports_its_stderr_and_status_at_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="core.mcp")
    config = McpConfig(servers={"npx": failing()}, connect_timeout=120, restart_backoff=600)
    began = time.monotonic()
    async with managed(tmp_path, config) as mgr:
        await mgr.wait_settled(120)
        waited = time.monotonic() - began
        (status,) = mgr.status()
    assert waited < 60, "noticed by the exit, not by connect_timeout"
    assert (status.state, status.exit_status) == ("failed", 7)
    assert status.error == "exited with status 7 during start-up"
    assert status.stderr is not None
    lines = status.stderr.splitlines()
    assert lines[0] == "npm warn using --force"
    assert "SELF_SIGNED_CERT_IN_CHAIN (token ***)" in lines[1]
    assert "https://registry.npmjs.org/..." in lines[2] and "key=abc" not in status.stderr
    (logged,) = [
        r.getMessage() for r in caplog.records if "mcp server npx failed" in r.getMessage()
    ]
    assert "exited with status 7" in logged and "SELF_SIGNED_CERT_IN_CHAIN" in logged
    assert "\n" not in logged and SECRET not in logged


async def test_the_stderr_tail_is_bounded(tmp_path: Path) -> None:
    noisy = 'for i in $(seq 1 500); do echo "line $i of noise" >&2; done; exit 1'
    config = McpConfig(
        servers={"noisy": McpServerConfig(command="/bin/sh", args=["-c", noisy])},
        restart_backoff=600,
    )
    async with managed(tmp_path, config) as mgr:
        await mgr.wait_settled(60)
        (status,) = mgr.status()
    assert status.stderr is not None and len(status.stderr.encode()) <= 2048
    assert status.stderr.splitlines()[-1] == "line 500 of noise"
    assert "line 1 of noise" not in status.stderr.splitlines()


async def test_a_server_killed_while_idle_is_noticed_and_restarted(tmp_path: Path) -> None:
    config = McpConfig(servers={"fake": stdio_server()}, restart_backoff=0.1)
    async with managed(tmp_path, config) as mgr:
        await mgr.wait_settled(60)
        connection = mgr.connections["fake"]
        pid = int((await connection.call("pid", {})).content[0].text)  # type: ignore[union-attr]
        os.kill(pid, signal.SIGKILL)
        await eventually(lambda: connection.starts == 2, timeout=60, what="restarted")
        assert connection.state == "ready"
    assert connection.exit_status is None  # cleared once it was ready again


async def test_env_passthrough_hands_named_host_variables_to_the_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NODE_EXTRA_CA_CERTS", "/etc/company-ca.pem")
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.internal:3128")
    monkeypatch.setenv("NOT_PASSED", "nope")
    server = stdio_server(env_passthrough=["HTTPS_PROXY", "UNSET_VARIABLE"])
    config = McpConfig(servers={"fake": server}, env_passthrough=["NODE_EXTRA_CA_CERTS"])
    async with managed(tmp_path, config) as mgr:
        await mgr.wait_settled(60)
        connection = mgr.connections["fake"]

        async def env(name: str) -> str:
            result = await connection.call("env", {"name": name})
            return str(result.content[0].text)  # type: ignore[union-attr]

        assert await env("NODE_EXTRA_CA_CERTS") == "/etc/company-ca.pem"  # [mcp]
        assert await env("HTTPS_PROXY") == "http://proxy.internal:3128"  # the server's own
        assert await env("NOT_PASSED") == "(unset)"
        assert await env("UNSET_VARIABLE") == "(unset)"


async def test_progress_notifications_become_the_turns_progress(tmp_path: Path) -> None:
    hub, registry = EphemeralHub(), ToolRegistry()
    message = InboundMessage(
        session_key="cli:t", text="go", delivery=Delivery(channel="cli", chat_id="t")
    )
    ctx = ToolContext(
        workspace=tmp_path, session_key="cli:t", channel="cli", message_id=message.id,
        message=message, deps=ToolDeps(hub),
    )  # fmt: skip
    config = McpConfig(servers={"fake": stdio_server()})
    async with managed(tmp_path, config, registry=registry) as mgr:
        await mgr.wait_settled(60)
        async with hub.subscribe(message.id) as subscription:
            result = await registry.execute(
                ToolCall(id="c1", name="mcp__fake__steps", arguments={"count": 3}), ctx
            )
            notes: list[str] = []
            while (item := subscription.get_nowait()) is not None:
                assert isinstance(item, Progress)
                notes.append(item.text)
    assert (result.content, result.is_error) == ("3 steps done", False)
    assert notes == [f"mcp__fake__steps: step {i} ({i}/3)" for i in (1, 2, 3)]


async def test_apply_starts_added_stops_removed_and_restarts_changed_servers(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="core.mcp.manager")
    starts = tmp_path / "starts"
    keep = stdio_server(env={"FAKE_MCP_STARTS": str(starts)})
    config = McpConfig(servers={"keep": keep, "gone": stdio_server(), "edit": stdio_server()})
    registry = ToolRegistry()
    async with managed(tmp_path, config, registry=registry) as mgr:
        await mgr.wait_settled(60)
        kept, gone = mgr.connections["keep"], mgr.connections["gone"]
        edited = stdio_server(env={"MARK": "edited"})
        await mgr.apply(
            McpConfig(servers={"keep": keep, "edit": edited, "new": stdio_server(eager=False)})
        )
        assert mgr.connections["keep"] is kept and kept.starts == 1
        assert gone.state == "stopped" and "gone" not in mgr.connections
        assert not any(t.startswith("mcp__gone__") for t in registry.names())
        await mgr.wait_settled(60)
        status = {s.name: s for s in mgr.status()}
        assert status["edit"].state == status["new"].state == "ready"
        mark = await mgr.connections["edit"].call("env", {"name": "MARK"})
        assert mark.content[0].text == "edited"  # type: ignore[union-attr]
        assert "mcp__new__echo" in status["new"].tools
    assert len(starts.read_text().split()) == 1  # the unchanged server was never restarted
    changes = [r.getMessage() for r in caplog.records if r.name == "core.mcp.manager"]
    assert sorted(changes) == sorted(
        [
            f"mcp server gone removed (was in {keep.source})",
            f"mcp server edit changed ({keep.source}): restarting",
            f"mcp server new added ({keep.source})",
        ]
    )


async def test_a_server_added_before_the_first_turn_waits_for_it(tmp_path: Path) -> None:
    async with managed(tmp_path, McpConfig(), every=False) as mgr:
        await mgr.apply(McpConfig(servers={"lazy": stdio_server(eager=False)}))
        assert not mgr.connections["lazy"].started
        await asyncio.wait_for(mgr.first_use(), 120)
        assert mgr.connections["lazy"].started
