"""``familiar schedule add|list|cancel``: manage scheduled prompts of the running gateway."""

from __future__ import annotations

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
    session_key_option,
    stdout_console,
    text_argument,
)
from gateway.commands.output import add_row
from gateway.control.client import ControlClient

__all__ = ["describe_schedule", "schedule_app"]

DEFAULT_SESSION = "cli:default"

schedule_app = command_group()


def describe_schedule(item: dict[str, Any]) -> str:
    """One line for a schedule as the control API returns it."""
    kind, spec = item.get("kind"), item.get("spec")
    head = f'cron "{spec}"' if kind == "cron" else "once" if kind == "at" else f"{kind} {spec}"
    when = item.get("next_run") or "no further runs"
    where, prompt = item.get("session"), item.get("prompt")
    return f"#{item.get('id')} {head} — next run {when} — {where}: {prompt!r}"


@schedule_app.command("add")
@click.argument(
    "prompt", callback=text_argument, help="The plain message to run (not a slash command)."
)
@click.option("--every", metavar="D", help="Repeat every D (10s to 1d).")
@click.option("--after", metavar="D", help="Run once after D.")
@click.option("--at", metavar="ISO", help="Run once at this date and time.")
@click.option("--cron", metavar="EXPR", help='5-field cron, e.g. "0 9 * * mon-fri".')
@click.option("--tz", metavar="TZ", help="IANA timezone for --at/--cron.")
@click.option(
    "--session",
    metavar="KEY",
    default=DEFAULT_SESSION,
    show_default=True,
    callback=session_key_option,
    help="Session key (NAME means cli:NAME).",
)
@json_option()
@home_option
def add(
    prompt: str,
    every: str | None,
    after: str | None,
    at: str | None,
    cron: str | None,
    tz: str | None,
    session: str,
    as_json: bool,
    home: Path | None,
) -> None:
    """Schedule PROMPT: exactly one of --every, --after, --at or --cron."""
    chosen = [
        (k, v) for k, v in (("every", every), ("after", after), ("at", at), ("cron", cron)) if v
    ]
    if len(chosen) != 1:
        raise click.BadParameter("give exactly one of --every, --after, --at or --cron")
    (kind, spec), key = chosen[0], session
    item = query(
        resolve_home(home),
        lambda client: client.add_schedule(
            kind=kind, spec=spec, prompt=prompt, session=key, timezone=tz
        ),
    )
    if as_json:
        print_json(item)
    else:
        click.echo(f"Scheduled {describe_schedule(item)}")


@schedule_app.command("list")
@json_option("Print JSON instead of a table.")
@home_option
def list_schedules(as_json: bool, home: Path | None) -> None:
    """List the active schedules of every session."""
    items = query(resolve_home(home), ControlClient.schedules)
    if as_json:
        print_json({"schedules": items})
        return
    if not items:
        click.echo("No schedules.")
        return
    table = Table("id", "session", "kind", "spec", "next run", "runs", "prompt")
    for item in items:
        add_row(
            table,
            f"#{item.get('id')}",
            item.get("session"),
            item.get("kind"),
            item.get("spec"),
            item.get("next_run") or "-",
            item.get("run_count"),
            item.get("prompt"),
        )
    stdout_console().print(table)


@schedule_app.command("cancel")
@click.argument("schedule_id", metavar="ID", help="The schedule id (3 or #3).")
@home_option
def cancel(schedule_id: str, home: Path | None) -> None:
    """Cancel a schedule."""
    raw = schedule_id.strip().lstrip("#")
    if not raw.isdigit():
        raise click.BadParameter(f"{schedule_id!r} is not a schedule id (e.g. 3 or #3)")
    item = query(resolve_home(home), lambda client: client.cancel_schedule(int(raw)))
    click.echo(f"Cancelled #{item.get('id')}.")
