"""``familiar status`` and ``familiar sessions list|show``: look into the running gateway."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import click
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from gateway.commands.common import (
    EXIT_FAILED,
    command_group,
    duration,
    fail,
    home_option,
    json_option,
    print_json,
    query,
    resolve_home,
    run_control,
    session_key_option,
    stdout_console,
)
from gateway.commands.output import add_row, styled
from gateway.commands.undelivered_view import undelivered_rows
from gateway.control.client import ControlClient, ControlError, DaemonUnavailable
from gateway.home import RUN_DIR
from gateway.process_table import supervised_processes

__all__ = ["sessions_app", "status"]

sessions_app = command_group()


def _when(stamp: object, *, clock_only: bool = False) -> str:
    if not isinstance(stamp, int | float):
        return "-"
    return time.strftime("%H:%M:%S" if clock_only else "%Y-%m-%d %H:%M:%S", time.localtime(stamp))


def _status_table(status: dict[str, Any]) -> Table:
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold")
    table.add_column()
    provider = status.get("provider")
    if isinstance(provider, dict):
        where = f" at {provider['base_url']}" if provider.get("base_url") else ""
        provider_text = f"{provider.get('kind')} {provider.get('model') or ''}{where}"
    else:
        provider_text = "none configured"
    queue = status.get("queue") or {}
    rows = [
        ("gateway", f"pid {status.get('pid')}, version {status.get('version')}"),
        ("uptime", duration(status.get("uptime_s"))),
        ("home", str(status.get("home"))),
        ("workspace", str(status.get("workspace"))),
        ("store", _store_text(status)),
        ("http", str(status.get("http") or "off")),
        ("provider", provider_text),
        ("sessions", f"{status.get('sessions')} ({status.get('busy_sessions')} busy)"),
        ("queue", f"{queue.get('pending', 0)} pending, {queue.get('claimed', 0)} claimed"),
        ("exec sandbox", _sandbox_text(status.get("exec_sandbox"))),
        *undelivered_rows(status),
        *_mcp_rows(status.get("mcp")),
        *_group_rows(status.get("group")),
    ]
    for name, value in rows:
        add_row(table, name, value)
    channels = status.get("channels") or []
    for channel in channels:
        add_row(table, f"channel {channel.get('name')}", _channel_state(channel))
    _add_processes(table, status.get("processes") or [])
    return table


def _add_processes(table: Table, processes: list[dict[str, Any]]) -> None:
    for process in processes:
        add_row(
            table, f"process {process.get('name') or process.get('role')}", _process_state(process)
        )


def _process_state(process: dict[str, Any]) -> Text:
    state = str(process.get("state"))
    color = "green" if state == "running" else "red" if state == "crash-loop" else "yellow"
    text = styled((state, color), f" pid {process.get('pid') or '-'}")
    text.append(f", {process.get('restarts', 0)} restarts")
    if state != "running" and process.get("error"):
        text.append(f": {process['error']}")
    return text


def _store_text(status: dict[str, Any]) -> str:
    health = status.get("store_health")
    if not isinstance(health, dict):
        return str(status.get("store"))
    if status.get("store_schema"):
        return f"{status.get('store')} schema {status['store_schema']}: " + _health_text(health)
    return f"{status.get('store')}: " + _health_text(health)


def _health_text(health: dict[str, Any]) -> str:
    verdict = "ok" if health.get("ok") else "FAILING"
    return f"{verdict} ({health.get('detail')})"


def _mcp_rows(servers: Any) -> list[tuple[str, str]]:
    """One row naming each MCP server with its state (``familiar mcp list`` says more)."""
    if not isinstance(servers, list) or not servers:
        return []
    states = ", ".join(f"{s.get('name')} {s.get('state')}" for s in servers if isinstance(s, dict))
    return [("mcp", f"{states} (familiar mcp list)")]


def _group_rows(group: Any) -> list[tuple[str, str]]:
    """Group mode: this member's name and state, then the others (``familiar group roster``)."""
    if not isinstance(group, dict):
        return []
    state = "joined" if group.get("joined") else "not joined"
    others = [
        f"{m.get('name')} {m.get('state')}"
        for m in group.get("members") or []
        if isinstance(m, dict) and m.get("name") != group.get("name")
    ]
    return [
        ("group", f"{group.get('name')} {state}, heartbeat {group.get('heartbeat_s')}s"),
        ("group peers", ", ".join(others) or "none"),
    ]


def _sandbox_text(sandbox: Any) -> str:
    if not isinstance(sandbox, dict):
        return "exec disabled"
    if sandbox.get("name") is None:
        return f"UNAVAILABLE: {sandbox.get('problem')}"
    if sandbox["name"] == "none":
        why = f": {sandbox['problem']}" if sandbox.get("problem") else ""
        return f"NONE (commands run unconfined){why}"
    network = "on" if sandbox.get("network") else "off"
    if sandbox["name"] == "systemd":
        problem = f" ({sandbox['problem']})" if sandbox.get("problem") else ""
        return f"systemd exec unit, network {network}{problem}"
    return f"bwrap, network {network}"


def _channel_state(channel: dict[str, Any]) -> Text:
    state = str(channel.get("state"))
    text = styled((state, {"running": "green", "failed": "red"}.get(state, "yellow")))
    if channel.get("error"):
        text.append(f": {channel['error']}")
    if channel.get("retry_in") is not None:
        text.append(f" (next attempt in {channel['retry_in']}s)")
    if channel.get("restarts"):
        text.append(f" {channel['restarts']} restarts", style="dim")
    failed = channel.get("failed_deliveries")
    if failed:
        text.append("; ").append(f"{failed} failed deliver{'y' if failed == 1 else 'ies'}", "red")
        last = channel.get("last_failed_delivery")
        if isinstance(last, dict):
            text.append(f" (last: {last.get('session')}: {last.get('error')})")
    return text


@click.command("status")
@json_option()
@home_option
def status(as_json: bool, home: Path | None) -> None:
    where = resolve_home(home)

    async def ask() -> dict[str, Any]:
        try:
            async with ControlClient(where) as client:
                return await client.status()
        except DaemonUnavailable:
            # The supervisor runs but its channels process does not answer (restarting,
            # crash-looping): show what it knows instead of "no gateway".
            found = await supervised_processes(where / RUN_DIR)
            if found is None:
                raise
            pid = found[0]
            return {"serving": False, "pid": pid, "supervisor": pid, "processes": found[1]}

    result = run_control(where, ask())
    # Here, not at the top: ``status --help`` and ``sessions`` need no config models.
    from gateway.trust import trust_lines, trust_summary

    result["trust"] = trust_summary(where)
    if as_json:
        print_json(result)
    elif result.get("serving") is False:
        console = stdout_console()
        console.print(
            f"the gateway runs (supervisor pid {result['supervisor']}) but its channels "
            "process does not answer the control socket:"
        )
        table = Table.grid(padding=(0, 2))
        _add_processes(table, result["processes"])
        console.print(table)
    else:
        stdout_console().print(_status_table(result))
    if not as_json:
        for line in trust_lines(result["trust"]):
            stdout_console().print(escape(line), style="yellow", soft_wrap=True)
    if result.get("serving") is False:
        raise click.exceptions.Exit(EXIT_FAILED)


@sessions_app.command("list")
@json_option()
@home_option
def sessions_list(as_json: bool, home: Path | None) -> None:
    """List sessions with their message counts."""
    rows = query(resolve_home(home), ControlClient.sessions)
    if as_json:
        print_json({"sessions": rows})
        return
    if not rows:
        stdout_console().print("no sessions yet")
        return
    table = Table("key", "channel", "messages", "pending", "updated")
    for row in rows:
        add_row(
            table,
            row.get("key"),
            row.get("channel"),
            row.get("messages", ""),
            row.get("pending", ""),
            _when(row.get("updated_at")),
        )
    stdout_console().print(table)


def _print_session(detail: dict[str, Any], *, events: bool) -> None:
    console = stdout_console()
    info = detail.get("session") or {}
    console.print(
        f"[bold]{escape(str(info.get('key')))}[/bold]  channel {escape(str(info.get('channel')))}"
        f"  messages {escape(str(info.get('messages')))}  updated {_when(info.get('updated_at'))}"
    )
    for entry in detail.get("history") or []:
        role = str(entry.get("role"))
        style = {"user": "cyan", "assistant": "green"}.get(role, "dim")
        mark = " [bold yellow]● unread[/]" if entry.get("unread") else ""
        content = escape(str(entry.get("content") or ""))
        console.print(f"[{style}]{escape(role)}[/]{mark}: {content}")
    unread = detail.get("unread") or []
    if unread:
        console.print(
            f"[yellow]{len(unread)} unread repl{'y' if len(unread) == 1 else 'ies'}[/] "
            "(familiar chat --session shows and marks them read)"
        )
    if not events:
        return
    table = Table(box=None, header_style="bold")
    for column in ("time", "type", "message"):
        table.add_column(column, no_wrap=True)
    table.add_column("data", overflow="fold")
    for event in detail.get("events") or []:
        data = json.dumps(event.get("data") or {}, ensure_ascii=False, default=str)
        add_row(
            table,
            _when(event.get("at"), clock_only=True),
            event.get("type"),
            str(event.get("message_id") or "")[:8],
            data if len(data) <= 120 else data[:119] + "…",
        )
    console.print(table)


@sessions_app.command("show")
@click.argument(
    "key",
    callback=session_key_option,
    help="The session key, e.g. cli:default; a bare NAME means cli:NAME.",
)
@click.option("--events", is_flag=True, help="Also print the event log.")
@json_option()
@home_option
def sessions_show(key: str, events: bool, as_json: bool, home: Path | None) -> None:
    """Show one session's history (and, with --events, its event log)."""

    async def fetch(client: ControlClient) -> dict[str, Any]:
        try:
            return await client.session(key, events=events)
        except ControlError as exc:
            if exc.status == 404:
                raise fail(f"no session {key!r}") from None
            raise

    detail = query(resolve_home(home), fetch)
    if as_json:
        print_json(detail)
    else:
        _print_session(detail, events=events)
