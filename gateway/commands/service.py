"""``familiar service install|uninstall|status``: the gateway as a systemd unit."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

import click

from core.errors import ConfigError
from gateway.commands.common import CliDeps, command_group, fail, home_option
from gateway.service import ServiceError, ServiceManager, UnitKind, default_home

__all__ = ["service_app"]

T = TypeVar("T")

service_app = command_group()

user_option = click.option(
    "--user/--system",
    default=None,
    help="A user unit (systemctl --user) or a system unit. Default: --system as root.",
)


def _unit_kind(user: bool | None) -> UnitKind:
    if user is None:
        return "system" if os.geteuid() == 0 else "user"
    return "user" if user else "system"


def _manager(ctx: click.Context) -> ServiceManager:
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
@user_option
@click.option("--now", is_flag=True, help="Also start it.")
@home_option
@click.pass_context
def service_install(ctx: click.Context, user: bool | None, now: bool, home: Path | None) -> None:
    """Install and enable the systemd unit that runs `familiar gateway`."""
    # Without --home the manager picks the kind's home (/var/lib/familiar for --system).
    where = home.expanduser().absolute() if home else None
    lines = _service(_manager(ctx).install(_unit_kind(user), now=now, home=where))
    for line in lines:
        click.echo(line)


@service_app.command("uninstall")
@user_option
@home_option
@click.pass_context
def service_uninstall(ctx: click.Context, user: bool | None, home: Path | None) -> None:
    """Stop, disable and remove the unit (the home and its data stay)."""
    for line in _service(_manager(ctx).uninstall(_unit_kind(user))):
        click.echo(line)


@service_app.command("status")
@user_option
@home_option
@click.pass_context
def service_status(ctx: click.Context, user: bool | None, home: Path | None) -> None:
    """Show whether the unit is installed and running, with its recent log."""
    result = _service(_manager(ctx).status(_unit_kind(user)))
    state = "installed" if result.installed else "not installed"
    click.echo(f"{result.unit_path}: {state}, {result.active_state}")
    if result.details:
        click.echo(result.details)
    if not result.active:
        raise click.exceptions.Exit(3)  # systemctl status convention: 3 = not running


@service_app.command("role-unit")
@click.argument("role", help="agent, channels or scheduler.")
@click.option(
    "--user",
    metavar="USER",
    default="familiar",
    show_default=True,
    help="The account the unit runs as.",
)
@home_option
@click.pass_context
def service_role_unit(ctx: click.Context, role: str, user: str, home: Path | None) -> None:
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
    click.echo(text, nl=False)
