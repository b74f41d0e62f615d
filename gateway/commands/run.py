"""``familiar init`` and ``familiar gateway``: set a home up, and run the gateway on it."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path

import click

from core.errors import ConfigError
from gateway.commands.common import fail, home_option, resolve_home

__all__ = ["GatewayRole", "gateway", "init"]


@click.command("init")
@home_option
def init(home: Path | None) -> None:
    from gateway.init import init_home

    try:
        lines = init_home(resolve_home(home))
    except (ConfigError, OSError) as exc:
        raise fail(str(exc)) from None
    for line in lines:
        click.echo(line)


class GatewayRole(StrEnum):
    agent = "agent"
    channels = "channels"
    scheduler = "scheduler"


@click.command("gateway")
@home_option
@click.option(
    "--role",
    type=click.Choice(GatewayRole),
    help="Run only this role in the foreground (a unit per role, another host); "
    "default: what gateway.processes says (main: one main process and a child per "
    "channel with an SDK; multi: the supervisor of every role; single: one process).",
)
@click.option("--channel", metavar="NAME", help="With --role channels: run only this channel.")
def gateway(home: Path | None, role: GatewayRole | None, channel: str | None) -> None:
    if channel is not None and role is not GatewayRole.channels:
        raise fail("--channel needs --role channels")
    # Imported here, not at the top: the daemon's imports (store, scheduler, metrics)
    # would add most of a second to every other command's start.
    from gateway.daemon import Role, run_gateway

    chosen: Role | None = role.value if role is not None else None
    raise click.exceptions.Exit(run_gateway(resolve_home(home), role=chosen, channel=channel))
