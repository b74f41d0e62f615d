"""The ``familiar`` command line: set up, run, inspect and talk to the gateway."""

from __future__ import annotations

import asyncio
import sys
from enum import StrEnum
from typing import Annotated, Any

import typer

# typer 0.29 vendors click as typer._click; its UsageError is the one raised here.
from typer._click.core import Context
from typer._click.exceptions import UsageError
from typer.core import TyperGroup

from core.errors import ConfigError, FamiliarError
from gateway.commands.backup import backup
from gateway.commands.chat import chat
from gateway.commands.common import (
    EXIT_FAILED,
    EXIT_USAGE,
    CliDeps,
    HomeOption,
    fail,
    resolve_home,
)
from gateway.commands.config_show import config_app
from gateway.commands.doctor import doctor
from gateway.commands.inspect import sessions_app, status
from gateway.commands.mcp import mcp_app
from gateway.commands.memory import memory_app
from gateway.commands.schedule import schedule_app
from gateway.commands.service import service_app
from gateway.commands.talk import send
from gateway.commands.tasks import tasks_app
from gateway.init import init_home

__all__ = ["CliDeps", "app", "main"]

EXIT_CODES = (
    "Exit status: 0 success (a reply), 1 failure (an agent/provider error, no reply yet, "
    "a failed check), 2 no gateway is running, 64 usage error (bad option or argument, "
    "text that is not UTF-8 or over the 1 MiB limit), 78 bad configuration (gateway)."
)


class _FamiliarGroup(TyperGroup):
    """Usage errors exit 64 (sysexits EX_USAGE), not click's 2: 2 means "no gateway"."""

    def make_context(
        self,
        info_name: str | None,
        args: list[str],
        parent: Context | None = None,
        **extra: Any,
    ) -> Context:
        try:
            return super().make_context(info_name, args, parent, **extra)
        except UsageError as exc:
            exc.exit_code = EXIT_USAGE
            raise

    def invoke(self, ctx: Context) -> Any:
        try:
            return super().invoke(ctx)
        except UsageError as exc:  # raised by a subcommand or one of its options
            exc.exit_code = EXIT_USAGE
            raise


app = typer.Typer(
    cls=_FamiliarGroup,
    no_args_is_help=True,
    add_completion=False,
    help="familiar: a self-hosted, always-on AI assistant gateway.",
    epilog=EXIT_CODES,
)


def init(home: HomeOption = None) -> None:
    """Write a commented config.toml and scaffold the workspace (never overwrites)."""
    try:
        lines = init_home(resolve_home(home))
    except (ConfigError, OSError) as exc:
        raise fail(str(exc)) from None
    for line in lines:
        typer.echo(line)


class GatewayRole(StrEnum):
    agent = "agent"
    channels = "channels"
    scheduler = "scheduler"


def gateway(
    home: HomeOption = None,
    role: Annotated[
        GatewayRole | None,
        typer.Option(
            help="Run only this role in the foreground (a unit per role, another host); "
            "default: the supervisor of every role, or one process with "
            'gateway.processes = "single".'
        ),
    ] = None,
    channel: Annotated[
        str | None, typer.Option(help="With --role channels: run only this channel.")
    ] = None,
) -> None:
    """Run the gateway in the foreground (what systemd runs)."""
    if channel is not None and role is not GatewayRole.channels:
        raise fail("--channel needs --role channels")
    if role is None:
        # The supervisor imports none of the daemon (store, agent, aiohttp): it stays small.
        from gateway.processes import supervise_or_none

        code = supervise_or_none(resolve_home(home))
        if code is not None:
            raise typer.Exit(code)
    # Imported here, not at the top: the daemon's imports (store, scheduler, metrics)
    # would add most of a second to every other command's start.
    from gateway.daemon import Role, serve

    chosen: Role | None = role.value if role is not None else None
    raise typer.Exit(asyncio.run(serve(resolve_home(home), role=chosen, channel=channel)))


app.add_typer(config_app, name="config")
app.add_typer(sessions_app, name="sessions")
app.add_typer(service_app, name="service")
app.add_typer(schedule_app, name="schedule")
app.add_typer(memory_app, name="memory")
app.add_typer(mcp_app, name="mcp")
app.add_typer(tasks_app, name="tasks")
app.command("send")(send)
app.command("chat")(chat)
app.command("status")(status)
app.command("doctor")(doctor)
app.command("backup")(backup)
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
