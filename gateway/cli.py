"""The ``familiar`` command line: set up, run, inspect and talk to the gateway."""

from __future__ import annotations

import sys

import typer

from core.errors import ConfigError, FamiliarError
from gateway.commands.chat import chat
from gateway.commands.common import EXIT_FAILED, CliDeps, HomeOption, fail, resolve_home
from gateway.commands.config_show import config_app
from gateway.commands.doctor import doctor
from gateway.commands.inspect import sessions_app, status
from gateway.commands.schedule import schedule_app
from gateway.commands.service import service_app
from gateway.commands.talk import send
from gateway.init import init_home

__all__ = ["CliDeps", "app", "main"]

app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    help="familiar: a self-hosted, always-on AI assistant gateway.",
)


def init(home: HomeOption = None) -> None:
    """Write a commented config.toml and scaffold the workspace (never overwrites)."""
    try:
        lines = init_home(resolve_home(home))
    except (ConfigError, OSError) as exc:
        raise fail(str(exc)) from None
    for line in lines:
        typer.echo(line)


def gateway(home: HomeOption = None) -> None:
    """Run the gateway in the foreground (what systemd runs)."""
    # Imported here, not at the top: the daemon's imports (store, scheduler, metrics)
    # would add most of a second to every other command's start.
    from gateway.daemon import run_gateway

    raise typer.Exit(run_gateway(resolve_home(home)))


app.add_typer(config_app, name="config")
app.add_typer(sessions_app, name="sessions")
app.add_typer(service_app, name="service")
app.add_typer(schedule_app, name="schedule")
app.command("send")(send)
app.command("chat")(chat)
app.command("status")(status)
app.command("doctor")(doctor)
app.command("init")(init)
app.command("gateway")(gateway)


def main() -> None:
    """Entry point of the ``familiar`` console script."""
    try:
        app()
    except FamiliarError as exc:  # anything a command did not map itself
        print(f"familiar: {exc}", file=sys.stderr)
        sys.exit(EXIT_FAILED)


if __name__ == "__main__":
    main()
