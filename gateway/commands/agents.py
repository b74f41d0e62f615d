"""``familiar agents list``: the agent types, as their files are read here and now."""

from __future__ import annotations

from pathlib import Path

import click
from rich.table import Table

from gateway.agent_report import agent_report
from gateway.commands.common import (
    command_group,
    config_or_fail,
    home_option,
    json_option,
    print_json,
    resolve_home,
    stdout_console,
)
from gateway.commands.output import add_row, styled

__all__ = ["agent_report", "agents_app"]

agents_app = command_group()


@agents_app.command("list")
@json_option()
@home_option
def list_agents(as_json: bool, home: Path | None) -> None:
    """Every agent type: built-in ones and those of agent files (workspace agents/,
    .github/agents/, .claude/agents/, .github/chatmodes/, then the home's agents/).

    For each: its id and display name, the file, its tools as mapped to ours, the
    names that map to nothing, its model as resolved through [models], and for a
    file that did not load, why (file and line).
    """
    home_dir = resolve_home(home)
    config = config_or_fail(home_dir)
    rows = agent_report(home_dir, config)
    if as_json:
        print_json({"agents": rows})
        return
    table = Table(box=None, header_style="bold")
    for column in ("id", "name", "source", "tools", "unmapped", "model", "loaded"):
        table.add_column(column, no_wrap=column == "id")
    for row in rows:
        tools = row["tools"]
        loaded = styled(("yes", "green")) if row["loaded"] else styled(("no", "red"))
        if not row["loaded"]:
            where = f" (line {row['line']})" if row["line"] else ""
            loaded.append(f": {row['reason']}{where}")
        model = row["model"] or "-"
        if row["model_requested"] and row["model_requested"] != row["model"]:
            model = f"{model} (from {row['model_requested']})"
        add_row(
            table,
            row["id"],
            row["display_name"] or "-",
            row["source"],
            tools if isinstance(tools, str) else ", ".join(tools or []) or "-",
            ", ".join(row["unmapped_tools"]) or "-",
            model,
            loaded,
        )
    stdout_console().print(table)
    notes = [(row["id"], note) for row in rows for note in row["notes"]]
    for name, note in notes:
        click.echo(f"note: {name}: {note}", err=True)
