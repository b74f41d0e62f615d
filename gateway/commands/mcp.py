"""``familiar mcp list|serve``: the MCP servers the agent uses, and familiar as an MCP server."""

from __future__ import annotations

import asyncio
import os
from dataclasses import asdict
from pathlib import Path
from typing import Any

import click
from rich.table import Table

from core.errors import ConfigError
from core.mcp import McpConfig
from core.trust import TRUST_FILE, WorkspaceTrust
from gateway.commands.common import (
    command_group,
    config_or_fail,
    fail,
    home_option,
    json_option,
    print_json,
    resolve_home,
    stdout_console,
)
from gateway.commands.output import add_row, styled
from gateway.config import FamiliarConfig, workspace_dir
from gateway.control.client import ControlClient, ControlError, DaemonUnavailable
from gateway.mcp import McpSources, read_mcp
from gateway.trust import allow_command

__all__ = ["mcp_app"]

mcp_app = command_group()


def _config(home: Path) -> tuple[FamiliarConfig, McpSources]:
    config = config_or_fail(home)
    found = read_mcp(config.mcp, home=home, workspace=workspace_dir(home, config), env=os.environ)
    return config, found


def _untrusted(found: McpSources, home: Path) -> list[dict[str, Any]]:
    """The servers of ignored workspace files: listed, never started."""
    return [
        {
            "name": name,
            "source": str(f.check.path),
            "state": f.check.state.value,
            "allow": allow_command(home, f.check.path),
        }
        for f in found.untrusted
        for name in f.servers or ("-",)
    ]


async def _from_daemon(home: Path) -> list[dict[str, Any]] | None:
    try:
        async with ControlClient(home, connect_timeout=3.0) as client:
            status = await asyncio.wait_for(client.status(), 10.0)
    except (DaemonUnavailable, ControlError, TimeoutError):
        return None
    servers = status.get("mcp")
    return [s for s in servers if isinstance(s, dict)] if isinstance(servers, list) else None


async def _probe(mcp: McpConfig, home: Path, workspace: Path) -> list[dict[str, Any]]:
    # Imported here, not at the top: the MCP SDK adds most of a second to every command.
    from core.mcp.manager import McpManager
    from core.mcp.trust import trust_verifier
    from core.tools.registry import ToolRegistry

    trust = WorkspaceTrust(record=home / TRUST_FILE, workspace=workspace)
    manager = McpManager(
        config=mcp, registry=ToolRegistry(), cwd=home, verify=trust_verifier(trust, cwd=home)
    )
    manager.start(every=True)
    try:
        await manager.wait_settled(mcp.connect_timeout)
        return [asdict(s) for s in manager.status()]
    finally:
        await manager.stop()


@mcp_app.command("list")
@json_option()
@home_option
def list_servers(as_json: bool, home: Path | None) -> None:
    """Every MCP server: where it is defined, its state and its tools.

    The running gateway's view when one answers; otherwise each enabled server is
    started here once to list its tools. A server from a workspace file that is not
    trusted ("familiar trust") is listed as untrusted and never started.
    """
    home_dir = resolve_home(home)
    config, found = _config(home_dir)
    problems = found.problems
    untrusted = _untrusted(found, home_dir)
    servers = asyncio.run(_from_daemon(home_dir))
    where = "gateway"
    if servers is None:
        where = "probed here (no gateway running)"
        workspace = workspace_dir(home_dir, config)
        servers = asyncio.run(_probe(found.config, home_dir, workspace))
    if as_json:
        print_json(
            {"servers": servers, "from": where, "problems": problems, "untrusted": untrusted}
        )
        return
    for problem in problems:
        click.echo(f"warning: {problem}", err=True)
    for u in untrusted:
        click.echo(
            f"untrusted: server {u['name']} of {u['source']} ({u['state']}) is not started; "
            f"trust it with: {u['allow']}",
            err=True,
        )
    if not servers and not untrusted:
        click.echo("No MCP servers configured ([mcp.servers.<name>] or an mcp.json file).")
        return
    table = Table("server", "transport", "state", "defined in", "tools", title=f"MCP ({where})")
    for s in servers:
        state = _state(s)
        add_row(
            table,
            s.get("name"),
            s.get("transport"),
            state,
            s.get("source"),
            ", ".join(_tool(name, s) for name in s.get("tools") or []) or "-",
        )
    for u in untrusted:
        add_row(table, u["name"], "-", styled((u["state"], "yellow")), u["source"], "-")
    stdout_console().print(table)
    for s in servers:
        if s.get("stderr"):
            click.echo(f"\n{s.get('name')}: the end of its stderr")
            click.echo("\n".join(f"  {line}" for line in str(s["stderr"]).splitlines()))


def _tool(name: str, server: dict[str, Any]) -> str:
    """A tool's name, and ``(task: required)`` for one that runs as an MCP task."""
    support = (server.get("task_support") or {}).get(name)
    return f"{name} (task: {support})" if support else name


def _state(server: dict[str, Any]) -> str:
    """``ready``, ``failed: why``, and each process's state where they differ."""
    state = str(server.get("state"))
    if server.get("error"):
        state += f": {server['error']}"
    processes = [p for p in server.get("processes") or [] if isinstance(p, dict)]
    if len({p.get("state") for p in processes}) > 1:
        state += " (" + ", ".join(f"{p.get('process')}: {p.get('state')}" for p in processes) + ")"
    return state


@mcp_app.command("serve")
@click.option("--http", is_flag=True, help="Serve streamable HTTP instead of stdio.")
@click.option("--host", metavar="HOST", help="HTTP address (default mcp.server.host).")
@click.option("--port", type=int, metavar="PORT", help="HTTP port (default mcp.server.port).")
@home_option
def serve(http: bool, host: str | None, port: int | None, home: Path | None) -> None:
    """Serve familiar's tools (send_message, list_sessions, read_session, schedule_*) over MCP.

    stdio by default (for Claude Desktop, Copilot, IDEs); ``--http`` serves streamable
    HTTP, which requires ``[mcp.server] token``. Either way the tools talk to the
    running gateway; when none runs, each tool says so.
    """
    from gateway.mcp.http import serve_http  # the MCP SDK: see _probe
    from gateway.mcp.server import build_mcp_server

    home_dir = resolve_home(home)
    config, _ = _config(home_dir)
    serve_config = config.mcp.server
    updates = {k: v for k, v in (("host", host), ("port", port)) if v is not None}
    serve_config = serve_config.model_copy(update=updates)
    server = build_mcp_server(home_dir, serve_config)
    if not http:
        server.run()
        return
    try:
        asyncio.run(serve_http(server, serve_config))
    except ConfigError as exc:
        raise fail(str(exc)) from None
    except KeyboardInterrupt:
        pass
