"""``familiar doctor``'s group check: this assistant's membership, read from the store."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy.exc import SQLAlchemyError

from core.errors import StoreError
from gateway.commands.doctor_check import Check
from gateway.commands.group import read_members
from gateway.config import FamiliarConfig

__all__ = ["group_checks"]

_NAME = "group membership"


async def group_checks(home: Path, config: FamiliarConfig | None) -> list[Check]:
    """None when group mode is off (or the config is invalid: that check failed); else
    whether this assistant is an active member and who else is."""
    if config is None or not config.group.enabled:
        return []
    name = config.group.member_name(config.agent.name)
    try:
        members = await read_members(home, config)
    except (StoreError, SQLAlchemyError, OSError) as exc:
        return [Check(_NAME, False, f"cannot read the roster: {exc}")]
    me = next((m for m in members if m["name"] == name), None)
    peers = [f"{m['name']} {m['state']}" for m in members if m["name"] != name]
    others = f"; peers: {', '.join(peers) or 'none'}"
    if me is None:
        return [
            Check(
                _NAME,
                True,
                f"{name} has not joined yet (starts with the gateway)" + others,
                warn=True,
            )
        ]
    if me["store_schema"] != config.store.search_schema:
        holder = me["store_schema"] or "(default)"
        way_out = (
            "choose another group.name"
            if me["state"] == "active"
            else f"`familiar group forget {name}` frees it, or choose another group.name"
        )
        reason = (
            f"the roster's {name} is another assistant's (store.schema {holder} on "
            f"{me['host']}, {me['state']}): {way_out}" + others
        )
        return [Check(_NAME, False, reason)]
    if me["state"] != "active":
        reason = f"{name} is {me['state']} (last heartbeat {me['last_heartbeat']})" + others
        return [Check(_NAME, True, reason, warn=True)]
    return [
        Check(_NAME, True, f"{name} active, schema {me['store_schema'] or '(default)'}" + others)
    ]
