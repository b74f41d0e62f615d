"""``familiar init`` and ``familiar gateway``: set a home up, and run the gateway on it."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

import typer

from core.errors import ConfigError
from gateway.commands.common import HomeOption, fail, resolve_home

__all__ = ["GatewayRole", "gateway", "init"]


def init(home: HomeOption = None) -> None:
    from gateway.init import init_home

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
            "default: what gateway.processes says (main: one main process and a child "
            "per channel with an SDK; multi: the supervisor of every role; single: one "
            "process)."
        ),
    ] = None,
    channel: Annotated[
        str | None, typer.Option(help="With --role channels: run only this channel.")
    ] = None,
) -> None:
    if channel is not None and role is not GatewayRole.channels:
        raise fail("--channel needs --role channels")
    # Imported here, not at the top: the daemon's imports (store, scheduler, metrics)
    # would add most of a second to every other command's start.
    from gateway.daemon import Role, run_gateway

    chosen: Role | None = role.value if role is not None else None
    raise typer.Exit(run_gateway(resolve_home(home), role=chosen, channel=channel))
