"""``familiar todos list``: the fleet todos of the running gateway's conversations."""

from __future__ import annotations

from pathlib import Path

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

__all__ = ["todos_app"]

todos_app = command_group()


@todos_app.command("list")
@click.option("--session", metavar="KEY", help="Only this session's (a full key).")
@json_option()
@home_option
def list_todos(session: str | None, as_json: bool, home: Path | None) -> None:
    """List todos in the order they were added, with status, dependencies and agent."""
    todos = query(resolve_home(home), lambda client: client.todos(session=session))
    if as_json:
        print_json({"todos": todos})
        return
    if not todos:
        click.echo("No todos.")
        return
    table = Table(box=None, header_style="bold")
    for column in ("session", "id", "status", "after", "agent", "title"):
        table.add_column(column, no_wrap=column in ("id", "status"))
    for todo in todos:
        add_row(
            table,
            todo.get("session"),
            todo.get("id"),
            todo.get("status"),
            ", ".join(str(d) for d in todo.get("depends_on") or []) or "-",
            todo.get("agent_id") or "-",
            str(todo.get("title") or "")[:60],
        )
    stdout_console().print(table)
