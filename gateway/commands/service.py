"""``familiar service install|uninstall|status``: the gateway as a systemd unit."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Coroutine
from typing import Annotated, Any, TypeVar

import typer

from core.errors import ConfigError
from gateway.commands.common import CliDeps, HomeOption, command_group, fail
from gateway.service import ServiceError, ServiceManager, UnitKind, default_home

__all__ = ["service_app"]

T = TypeVar("T")

service_app = command_group()

UserOption = Annotated[
    bool | None,
    typer.Option(
        "--user/--system",
        help="A user unit (systemctl --user) or a system unit. Default: --system as root.",
        show_default=False,
    ),
]


def _unit_kind(user: bool | None) -> UnitKind:
    if user is None:
        return "system" if os.geteuid() == 0 else "user"
    return "user" if user else "system"


def _manager(ctx: typer.Context) -> ServiceManager:
    deps = ctx.find_object(CliDeps)
    if deps is not None and deps.service_manager is not None:
        return deps.service_manager
    return ServiceManager()


def _service(coro: Coroutine[Any, Any, T]) -> T:
    try:
        return asyncio.run(coro)
    except (ServiceError, ConfigError) as exc:
        raise fail(str(exc)) from None


@service_app.command("install")
def service_install(
    ctx: typer.Context,
    user: UserOption = None,
    now: Annotated[bool, typer.Option("--now", help="Also start it.")] = False,
    home: HomeOption = None,
) -> None:
    """Install and enable the systemd unit that runs `familiar gateway`."""
    # Without --home the manager picks the kind's home (/var/lib/familiar for --system).
    where = home.expanduser().absolute() if home else None
    lines = _service(_manager(ctx).install(_unit_kind(user), now=now, home=where))
    for line in lines:
        typer.echo(line)


@service_app.command("uninstall")
def service_uninstall(ctx: typer.Context, user: UserOption = None, home: HomeOption = None) -> None:
    """Stop, disable and remove the unit (the home and its data stay)."""
    for line in _service(_manager(ctx).uninstall(_unit_kind(user))):
        typer.echo(line)


@service_app.command("status")
def service_status(ctx: typer.Context, user: UserOption = None, home: HomeOption = None) -> None:
    """Show whether the unit is installed and running, with its recent log."""
    result = _service(_manager(ctx).status(_unit_kind(user)))
    state = "installed" if result.installed else "not installed"
    typer.echo(f"{result.unit_path}: {state}, {result.active_state}")
    if result.details:
        typer.echo(result.details)
    if not result.active:
        raise typer.Exit(3)  # systemctl status convention: 3 = not running


@service_app.command("role-unit")
def service_role_unit(
    ctx: typer.Context,
    role: Annotated[str, typer.Argument(help="agent, channels or scheduler.")],
    user: Annotated[str, typer.Option(help="The account the unit runs as.")] = "familiar",
    home: HomeOption = None,
) -> None:
    """Print the system unit of one role (a split deployment: a unit per role or host).

    Save it as the file named in its first line under /etc/systemd/system/. It makes
    the checks `service install` makes (the account exists and can run this
    interpreter and read this code, neither under /tmp) and prints nothing otherwise.
    """
    where = home.expanduser().absolute() if home else default_home("system")
    try:
        text = _manager(ctx).role_unit(role, home=where, user=user)
    except ConfigError as exc:
        raise fail(str(exc)) from None
    typer.echo(text, nl=False)
