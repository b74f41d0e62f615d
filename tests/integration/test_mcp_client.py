"""The MCP client against real MCP server subprocesses (stdio and streamable HTTP)."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from click.testing import CliRunner

from core.event_data import ToolComplete
from core.mcp import McpConfig, McpServerConfig
from core.mcp.manager import McpManager
from core.providers.base import ToolCall
from core.providers.config import ProviderConfig
from core.providers.openai import OpenAIProvider
from core.tools.base import ToolContext
from core.tools.config import PolicyRule, ToolPolicyConfig
from core.tools.policy import ToolPolicy
from core.tools.registry import ToolRegistry, ToolResult
from gateway.cli import app
from gateway.mcp import resolve_mcp
from tests.fakes.fake_openai import FakeOpenAI, ToolCalls
from tests.fakes.mcp_procs import ROOT, http_server, stdio_server
from tests.integration.harness import inbound, running_core
from tests.trusting import trust_workspace
from tests.waiting import eventually


@asynccontextmanager
async def manager(
    tmp_path: Path,
    policy: ToolPolicyConfig | None = None,
    backoff: float = 0.1,
    **servers: McpServerConfig,
) -> AsyncIterator[tuple[McpManager, ToolRegistry]]:
    registry = ToolRegistry(policy=ToolPolicy(config=policy) if policy else None)
    config = McpConfig(servers=servers, restart_backoff=backoff)
    mgr = McpManager(config=config, registry=registry, cwd=tmp_path)
    mgr.start(every=True)
    try:
        await mgr.wait_settled(60)
        yield mgr, registry
    finally:
        await mgr.stop()


def ctx(tmp_path: Path) -> ToolContext:
    return ToolContext(workspace=tmp_path, session_key="cli:t", channel="cli")


async def call(registry: ToolRegistry, tmp_path: Path, tool: str, **args: object) -> ToolResult:
    return await registry.execute(ToolCall(id="c1", name=tool, arguments=args), ctx(tmp_path))


async def test_stdio_tools_are_namespaced_with_the_servers_schema(tmp_path: Path) -> None:
    async with manager(tmp_path, fake=stdio_server()) as (mgr, registry):
        assert {"mcp__fake__echo", "mcp__fake__add", "mcp__fake__crash"} <= set(registry.names())
        (spec,) = registry.specs(["mcp__fake__add"])
        assert spec.parameters["properties"].keys() == {"a", "b"}
        assert spec.parameters["required"] == ["a", "b"]
        result = await call(registry, tmp_path, "mcp__fake__add", a=2, b=40)
        assert (result.content, result.is_error) == ("42", False)
        (status,) = mgr.status()
        assert (status.state, status.transport, status.starts) == ("ready", "stdio", 1)


async def test_is_error_results_and_bad_arguments_reach_the_model_as_errors(
    tmp_path: Path,
) -> None:
    async with manager(tmp_path, fake=stdio_server()) as (_, registry):
        failed = await call(registry, tmp_path, "mcp__fake__fail", reason="disk on fire")
        assert failed.is_error and "disk on fire" in failed.content
        bad = await call(registry, tmp_path, "mcp__fake__add", a="x")
        assert bad.is_error


async def test_stdio_server_gets_only_declared_env_never_the_daemons_secrets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAMILIAR_PROVIDER__API_KEY", "sk-daemon-secret")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-other-secret")
    server = stdio_server(env={"GITHUB_TOKEN": "ghp-declared"})
    async with manager(tmp_path, fake=server) as (_, registry):
        for name, expected in (
            ("GITHUB_TOKEN", "ghp-declared"),
            ("FAMILIAR_PROVIDER__API_KEY", "(unset)"),
            ("OPENAI_API_KEY", "(unset)"),
        ):
            result = await call(registry, tmp_path, "mcp__fake__env", name=name)
            assert result.content == expected, name
        assert (await call(registry, tmp_path, "mcp__fake__env", name="PATH")).content != "(unset)"


async def test_a_stdio_server_starts_in_the_home_not_the_agents_workspace(tmp_path: Path) -> None:
    home, workspace = tmp_path / "home", tmp_path / "home" / "workspace"
    workspace.mkdir(parents=True)
    async with FakeOpenAI() as fake:
        fake.script(ToolCalls((("mcp__fake__cwd", {}),)), "done")
        provider = OpenAIProvider(
            config=ProviderConfig(kind="openai", base_url=fake.base_url, model="fake")
        )
        async with running_core(
            store_url=f"sqlite+aiosqlite:///{tmp_path / 'f.db'}",
            workspace=workspace,
            provider=provider,
            home=home,
            mcp=McpConfig(servers={"fake": stdio_server(cwd=None)}),
        ) as (app, replies):
            await app.mcp.wait_settled(60)
            m = inbound("cli:t", "where are you")
            await app.bus.publish_inbound(m)
            await replies.wait([m.id])
        await provider.aclose()
    tool_message = fake.requests[-1]["messages"][-1]
    assert tool_message["role"] == "tool"
    assert tool_message["content"] == str(home.resolve())


async def test_a_server_that_crashes_mid_call_errors_cleanly_and_is_restarted(
    tmp_path: Path,
) -> None:
    async with manager(tmp_path, fake=stdio_server()) as (mgr, registry):
        crashed = await call(registry, tmp_path, "mcp__fake__crash")
        assert crashed.is_error and "lost the connection" in crashed.content
        connection = mgr.connections["fake"]
        await eventually(
            lambda: connection.starts == 2 and connection.state == "ready", what="restart"
        )
        again = await call(registry, tmp_path, "mcp__fake__echo", text="back")
        assert (again.content, again.is_error) == ("back", False)


async def test_a_hanging_call_times_out_and_the_server_stays_usable(tmp_path: Path) -> None:
    async with manager(tmp_path, fake=stdio_server(timeout=3.0)) as (mgr, registry):
        hung = await call(registry, tmp_path, "mcp__fake__hang")
        assert hung.is_error and "timed out after 3 s" in hung.content
        after = await call(registry, tmp_path, "mcp__fake__echo", text="still here")
        assert after.content == "still here"
        assert mgr.connections["fake"].starts == 1


async def test_tool_allow_list_and_policy_deny(tmp_path: Path) -> None:
    policy = ToolPolicyConfig(deny=["mcp__x__*"])
    servers = {"x": stdio_server(), "y": stdio_server(tools=["echo", "a*"])}
    async with manager(tmp_path, policy, **servers) as (_, registry):
        assert sorted(n for n in registry.names() if n.startswith("mcp__y")) == [
            "mcp__y__add",
            "mcp__y__echo",
        ]
        offered = {s.name for s in registry.specs(ctx=ctx(tmp_path))}
        assert "mcp__y__echo" in offered
        assert not any(n.startswith("mcp__x__") for n in offered)
        assert "mcp__x__echo" in registry
        denied = await call(registry, tmp_path, "mcp__x__echo", text="hi")
        assert denied.is_error and "denied" in denied.content


async def test_a_server_that_cannot_start_is_reported_and_blocks_nothing(
    tmp_path: Path,
) -> None:
    broken = McpServerConfig(command=str(tmp_path / "no-such-server"))
    # A long backoff: the failed server stays "failed" rather than "starting" again
    # while the test looks (a loaded machine may take longer than a short one).
    async with manager(tmp_path, backoff=600, broken=broken, fake=stdio_server()) as (
        mgr,
        registry,
    ):
        status = {s.name: s for s in mgr.status()}
        assert status["broken"].state == "failed" and status["broken"].error
        assert [s.name for s in mgr.failing()] == ["broken"]
        assert (await call(registry, tmp_path, "mcp__fake__echo", text="ok")).content == "ok"


async def test_streamable_http_server_with_headers(tmp_path: Path) -> None:
    async with (
        http_server() as url,
        manager(tmp_path, web=McpServerConfig(url=url, headers={"X-Test": "1"})) as (mgr, reg),
    ):
        (status,) = mgr.status()
        assert (status.transport, status.state) == ("http", "ready")
        result = await call(reg, tmp_path, "mcp__web__add", a=1, b=2)
        assert (result.content, result.is_error) == ("3", False)


async def test_the_models_tool_call_reaches_the_mcp_server_and_returns(tmp_path: Path) -> None:
    async with FakeOpenAI() as fake:
        fake.script(ToolCalls((("mcp__fake__add", {"a": 20, "b": 22}),)), "the sum is 42")
        provider = OpenAIProvider(
            config=ProviderConfig(kind="openai", base_url=fake.base_url, model="fake")
        )
        async with running_core(
            store_url=f"sqlite+aiosqlite:///{tmp_path / 'f.db'}",
            workspace=tmp_path / "ws",
            provider=provider,
            mcp=McpConfig(servers={"fake": stdio_server()}),
        ) as (app, replies):
            await app.mcp.wait_settled(60)
            m = inbound("cli:t", "add 20 and 22")
            await app.bus.publish_inbound(m)
            (out,) = await replies.wait([m.id])
            events = await app.events.list("cli:t", message_id=m.id)
        await provider.aclose()
    assert out.text == "the sum is 42"
    offered = {t["function"]["name"]: t["function"] for t in fake.requests[0]["tools"]}
    assert offered["mcp__fake__add"]["parameters"]["required"] == ["a", "b"]
    tool_message = fake.requests[-1]["messages"][-1]
    assert (tool_message["role"], tool_message["content"]) == ("tool", "42")
    complete = [e.data for e in events if isinstance(e.data, ToolComplete)]
    assert [(c.tool, c.is_error) for c in complete] == [("mcp__fake__add", False)]


def write_mcp_json(workspace: Path) -> None:
    workspace.mkdir(parents=True, exist_ok=True)
    entry = {
        "command": "${PYTHON}",
        "args": ["-m", "tests.fakes.mcp_tools_server"],
        "cwd": "${env:FAKE_ROOT}",
        "env": {"PYTHONPATH": "${FAKE_ROOT}", "SECRET": "$MY_TOKEN", "MODE": "${MODE:-auto}"},
    }
    (workspace / ".mcp.json").write_text(json.dumps({"mcpServers": {"fromfile": entry}}))


async def test_a_server_from_mcp_json_with_var_expansion_loads(tmp_path: Path) -> None:
    write_mcp_json(tmp_path / "ws")
    env = {"PYTHON": sys.executable, "FAKE_ROOT": str(ROOT), "MY_TOKEN": "tok-123"}
    trust_workspace(tmp_path, tmp_path / "ws", env=env)
    mcp, problems = resolve_mcp(McpConfig(), home=tmp_path, workspace=tmp_path / "ws", env=env)
    assert problems == []
    async with manager(tmp_path, **mcp.servers) as (mgr, registry):
        (status,) = mgr.status()
        assert (status.name, status.state) == ("fromfile", "ready")
        assert status.source == str(tmp_path / "ws" / ".mcp.json")
        for name, expected in (("SECRET", "tok-123"), ("MODE", "auto")):
            result = await call(registry, tmp_path, "mcp__fromfile__env", name=name)
            assert result.content == expected


def test_mcp_list_without_a_gateway_probes_the_servers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_mcp_json(tmp_path / "workspace")
    (tmp_path / "config.toml").write_text(
        '[mcp.servers.off]\ncommand = "nothing"\nenabled = false\n', encoding="utf-8"
    )
    for name, value in (("PYTHON", sys.executable), ("FAKE_ROOT", str(ROOT)), ("MY_TOKEN", "x")):
        monkeypatch.setenv(name, value)
    trusted = CliRunner().invoke(
        app, ["trust", "allow", str(tmp_path / "workspace" / ".mcp.json"), "--home", str(tmp_path)]
    )
    assert trusted.exit_code == 0, trusted.output
    result = CliRunner().invoke(app, ["mcp", "list", "--json", "--home", str(tmp_path)])
    assert result.exit_code == 0, result.output
    listed = json.loads(result.stdout)
    assert listed["from"].startswith("probed here")
    servers = {s["name"]: s for s in listed["servers"]}
    assert servers["off"]["state"] == "disabled"
    assert servers["fromfile"]["state"] == "ready"
    assert "mcp__fromfile__echo" in servers["fromfile"]["tools"]
    table = CliRunner().invoke(app, ["mcp", "list", "--home", str(tmp_path)])
    assert "fromfile" in table.stdout and "mcp__fromfile__add" in table.stdout


async def test_an_agent_types_tool_list_restricts_mcp_tools(tmp_path: Path) -> None:
    policy = ToolPolicyConfig(per_agent={"reviewer": PolicyRule(allow=["mcp__fake__echo"])})
    async with manager(tmp_path, policy, fake=stdio_server()) as (_, registry):
        reviewer = ToolContext(workspace=tmp_path, session_key="subagent:1", agent_type="reviewer")
        assert [s.name for s in registry.specs(ctx=reviewer)] == ["mcp__fake__echo"]
        refused = await registry.execute(
            ToolCall(id="c", name="mcp__fake__add", arguments={"a": 1, "b": 2}), reviewer
        )
        assert refused.is_error and "allow list" in refused.content
        main = {s.name for s in registry.specs(ctx=ctx(tmp_path))}
        assert {"mcp__fake__echo", "mcp__fake__add"} <= main


async def test_an_http_url_falls_back_to_sse_when_the_server_only_speaks_sse(
    tmp_path: Path,
) -> None:
    async with (
        http_server(sse=True) as url,
        manager(tmp_path, old=McpServerConfig(url=url)) as (mgr, registry),
    ):
        (status,) = mgr.status()
        assert status.state == "ready" and mgr.connections["old"].sse_fallback
        result = await call(registry, tmp_path, "mcp__old__add", a=5, b=6)
        assert (result.content, result.is_error) == ("11", False)


async def test_stopping_does_not_wait_for_a_server_that_never_answers(tmp_path: Path) -> None:
    silent = McpServerConfig(command=sys.executable, args=["-c", "import time; time.sleep(600)"])
    registry = ToolRegistry()
    mgr = McpManager(
        config=McpConfig(servers={"silent": silent}, connect_timeout=600),
        registry=registry,
        cwd=tmp_path,
    )
    mgr.start(every=True)
    await eventually(lambda: mgr.connections["silent"].state == "starting", what="starting")
    async with asyncio.timeout(60):  # far below connect_timeout
        await mgr.stop()
    assert mgr.status()[0].state == "stopped" and len(registry) == 0
