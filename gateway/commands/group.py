"""``familiar group roster|timeline|forget``: the group as the shared store holds it.

Read from the store directly (not through the running gateway): it works while this
gateway is stopped, and shows what every member sees.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.table import Table

from gateway.commands.common import (
    EXIT_FAILED,
    command_group,
    config_or_fail,
    fail,
    home_option,
    json_option,
    print_json,
    resolve_home,
    stdout_console,
)
from gateway.commands.output import add_row, styled
from gateway.config import FamiliarConfig

if TYPE_CHECKING:
    from core.group.roster import Member
    from core.store.engine import Store

Rows = list[dict[str, Any]]

__all__ = ["group_app", "read_members", "read_timeline"]

group_app = command_group()

_STATE_COLOURS = {"active": "green", "left": "yellow", "gone": "red"}


async def read_members(home: Path, config: FamiliarConfig) -> list[dict[str, Any]]:
    """Every member of the group, JSON-ready (empty when no member ever joined).

    Raises:
        StoreError, OSError: the store cannot be read.
    """
    from core.group.roster import Roster

    async def read(store: Store) -> Rows:
        roster = Roster(store, expire_after=config.group.expire_after)
        return [_member_json(m) for m in await roster.members()]

    return await _with_store(home, config, read)


async def read_timeline(home: Path, config: FamiliarConfig, limit: int) -> list[dict[str, Any]]:
    """The newest ``limit`` timeline entries, oldest first, JSON-ready."""
    from core.group.timeline import Timeline

    async def read(store: Store) -> Rows:
        entries = await Timeline(store).recent(limit)
        return [
            {"id": e.id, "at": _iso(e.at), "member": e.member, "kind": e.kind, "detail": e.detail}
            for e in entries
        ]

    return await _with_store(home, config, read)


async def _with_store(
    home: Path, config: FamiliarConfig, read: Callable[[Store], Awaitable[Rows]]
) -> Rows:
    from core.group.roster import Roster
    from core.store.engine import Store
    from gateway.config import store_url

    store = Store(url=store_url(home, config), config=config.store)
    await store.open(migrate=False)
    try:
        if not await Roster(store, expire_after=config.group.expire_after).exists():
            return []  # no member has created the group's tables yet
        return await read(store)
    finally:
        await store.close()


def _member_json(member: Member) -> dict[str, Any]:
    return {
        "name": member.name,
        "state": member.state,
        "description": member.description,
        "host": member.host,
        "version": member.version,
        "store_schema": member.store_schema,
        "started_at": _iso(member.started_at),
        "last_heartbeat": _iso(member.last_heartbeat),
        "capabilities": member.capabilities,
        "identity": member.identity,
    }


def _iso(when: datetime) -> str:
    return when.isoformat(timespec="seconds")


def _group_config(home: Path) -> FamiliarConfig:
    config = config_or_fail(home)
    if config.store.url is None or config.store.url.startswith("sqlite"):
        raise fail(
            "group mode needs a PostgreSQL store that the members share: "
            "store.url is the SQLite file of this home"
        )
    return config


def _run(coro: Coroutine[Any, Any, Rows]) -> Rows:
    from sqlalchemy.exc import SQLAlchemyError

    from core.errors import StoreError

    try:
        result = asyncio.run(coro)
    except (StoreError, SQLAlchemyError, OSError) as exc:
        raise fail(f"cannot read the group from the store: {exc}", EXIT_FAILED) from None
    return result


@group_app.command("roster")
@json_option()
@home_option
def roster(as_json: bool, home: Path | None) -> None:
    """Every member of the group: state (active, left, gone), last heartbeat, host,
    version and capabilities. Read from the shared store: works with the gateway
    stopped."""
    home_dir = resolve_home(home)
    config = _group_config(home_dir)
    members = _run(read_members(home_dir, config))
    if as_json:
        print_json({"members": members})
        return
    if not members:
        click.echo("no member has joined the group yet")
        return
    table = Table(box=None, header_style="bold")
    for column in ("name", "state", "last heartbeat", "host", "version", "capabilities"):
        table.add_column(column, no_wrap=column == "name")
    for m in members:
        caps = "; ".join(f"{k}: {', '.join(v) or '-'}" for k, v in m["capabilities"].items())
        state = styled((m["state"], _STATE_COLOURS.get(m["state"], "")))
        add_row(table, m["name"], state, m["last_heartbeat"], m["host"], m["version"], caps)
    stdout_console().print(table)


@group_app.command("timeline")
@click.option(
    "--limit", type=click.IntRange(1, 10_000), default=50, show_default=True,
    help="How many of the newest entries to show.",
)  # fmt: skip
@json_option()
@home_option
def timeline(limit: int, as_json: bool, home: Path | None) -> None:
    """The group's history, oldest first: joins, updates (what changed), leaves and
    expiries."""
    home_dir = resolve_home(home)
    config = _group_config(home_dir)
    entries = _run(read_timeline(home_dir, config, limit))
    if as_json:
        print_json({"entries": entries})
        return
    if not entries:
        click.echo("the group timeline is empty")
        return
    table = Table(box=None, header_style="bold")
    for column in ("at", "member", "event", "detail"):
        table.add_column(column, no_wrap=column != "detail")
    for e in entries:
        add_row(table, e["at"], e["member"], e["kind"], _detail_text(e["kind"], e["detail"]))
    stdout_console().print(table)


@group_app.command("forget")
@click.argument("name")
@home_option
def forget(name: str, home: Path | None) -> None:
    """Delete NAME's roster entry (a member that left or is gone), so that another
    assistant may take the name; its timeline history stays. The roster does this by
    itself group.retention_days after a member left."""
    from core.group.roster import Roster

    home_dir = resolve_home(home)
    config = _group_config(home_dir)

    async def run(store: Store) -> Rows:
        roster = Roster(store, expire_after=config.group.expire_after)
        return [{"outcome": await roster.forget(name)}]

    outcomes = [row["outcome"] for row in _run(_with_store(home_dir, config, run))]
    if outcomes == ["forgotten"]:
        click.echo(f"forgot {name}: another assistant may take the name now")
        return
    if outcomes == ["active"]:
        raise fail(f"{name} is active (its heartbeat is recent): stop that gateway first")
    raise fail(f"no member {name!r} in the roster")


def _detail_text(kind: str, detail: dict[str, Any]) -> str:
    if kind == "group.joined":
        return f"{detail.get('description') or ''} (version {detail.get('version')})".strip()
    if kind == "group.expired":
        return f"last heartbeat {detail.get('last_heartbeat')}"
    if kind == "group.forgotten":
        if detail.get("by") == "operator":
            return "by `familiar group forget`"
        return f"{detail.get('after_days', '?'):g} days after it left"
    parts = []
    for key, value in detail.items():
        if isinstance(value, dict):
            added = " ".join(f"+{n}" for n in value.get("added", []))
            removed = " ".join(f"-{n}" for n in value.get("removed", []))
            parts.append(f"{key}: {' '.join(p for p in (added, removed) if p)}")
        else:
            parts.append(f"{key} changed")
    return "; ".join(parts) or "-"
