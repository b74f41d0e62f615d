"""``familiar memory list|search|scopes|forget``: what the agent remembers, in every scope."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import click
from rich.table import Table

from gateway.commands.common import (
    command_group,
    home_option,
    json_option,
    print_json,
    query,
    resolve_home,
    stdout_console,
)
from gateway.commands.output import add_row

__all__ = ["memory_app"]

memory_app = command_group()

scope_option = click.option(
    "--scope", metavar="KEY", help="Only this scope: a session key or 'global'."
)


def _print(entries: list[dict[str, Any]], *, empty: str) -> None:
    if not entries:
        click.echo(empty)
        return
    table = Table("id", "scope", "date", "tags", "text", box=None, header_style="bold")
    for entry in entries:
        stamp = entry.get("updated_at")
        day = time.strftime("%Y-%m-%d", time.localtime(stamp)) if isinstance(stamp, float) else ""
        tags = ", ".join(str(t) for t in entry.get("tags") or [])
        add_row(table, f"#{entry.get('id')}", entry.get("scope"), day, tags, entry.get("text"))
    stdout_console().print(table)


@memory_app.command("list")
@scope_option
@json_option()
@home_option
def list_memory(scope: str | None, as_json: bool, home: Path | None) -> None:
    """List the newest memory entries."""
    entries = query(resolve_home(home), lambda client: client.memory(scope=scope))
    if as_json:
        print_json({"entries": entries})
    else:
        _print(entries, empty="No memories yet.")


@memory_app.command("search")
@click.argument("text", metavar="QUERY", help="A few keywords.")
@scope_option
@json_option()
@home_option
def search_memory(text: str, scope: str | None, as_json: bool, home: Path | None) -> None:
    """Search memory entries, best match first."""
    entries = query(resolve_home(home), lambda client: client.search_memory(text, scope=scope))
    if as_json:
        print_json({"entries": entries})
    else:
        _print(entries, empty="Nothing matches.")


@memory_app.command("forget")
@click.argument("entry_id", metavar="ID", help="The entry id (12 or #12).")
@home_option
def forget_memory(entry_id: str, home: Path | None) -> None:
    """Delete a memory entry (of any scope)."""
    raw = entry_id.strip().lstrip("#")
    if not raw.isdigit():
        raise click.BadParameter(f"{entry_id!r} is not a memory id (e.g. 12 or #12)")
    entry = query(resolve_home(home), lambda client: client.forget_memory(int(raw)))
    click.echo(f"Forgot #{entry.get('id')} ({entry.get('scope')}): {entry.get('text')}")


@memory_app.command("scopes")
@json_option()
@home_option
def memory_scopes(as_json: bool, home: Path | None) -> None:
    """List the scopes that have memory entries, the most recently changed first."""
    scopes = query(resolve_home(home), lambda client: client.memory_scopes())
    if as_json:
        print_json({"scopes": scopes})
        return
    if not scopes:
        click.echo("No memories yet.")
        return
    table = Table("scope", "entries", "changed", box=None, header_style="bold")
    for found in scopes:
        stamp = found.get("updated_at")
        day = time.strftime("%Y-%m-%d", time.localtime(stamp)) if isinstance(stamp, float) else ""
        add_row(table, found.get("scope"), found.get("entries"), day)
    stdout_console().print(table)
