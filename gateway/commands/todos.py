"""``familiar todos list``: the fleet todos of the running gateway's conversations."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from gateway.commands.common import (
    HomeOption,
    JsonOption,
    command_group,
    print_json,
    query,
    resolve_home,
    stdout_console,
)
from gateway.commands.output import add_row

__all__ = ["todos_app"]

todos_app = command_group()


@todos_app.command("list")
def list_todos(
    session: Annotated[
        str | None,
        typer.Option("--session", metavar="KEY", help="Only this session's (a full key)."),
    ] = None,
    as_json: JsonOption = False,
    home: HomeOption = None,
) -> None:
    """List todos in the order they were added, with status, dependencies and agent."""
    todos = query(resolve_home(home), lambda client: client.todos(session=session))
    if as_json:
        print_json({"todos": todos})
        return
    if not todos:
        typer.echo("No todos.")
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
