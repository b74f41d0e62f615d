"""The entry point of the daemon (``familiar gateway``, ``python -m gateway.daemon``): it
picks the process shape ``gateway.processes`` names, and composes it: the supervisor of
role processes (`gateway.processes`, ``multi``), or the gateway in this process
(`gateway.serve`: ``main``, with channel child processes, or ``single``)."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from gateway.config import default_home
from gateway.gateway_parts import ROLES, SOCKET_FILE, WAKE_DIR, Role
from gateway.init import LoadedHome
from gateway.lock import CHANNELS_LOCK_FILE, LOCK_FILE, GatewayLocked
from gateway.process_table import EX_CONFIG, PARENT_FD_ENV
from gateway.processes import supervise_or_none
from gateway.serve import serve
from gateway.store_migration import migrate_store

__all__ = [
    "CHANNELS_LOCK_FILE",
    "EX_CONFIG",
    "LOCK_FILE",
    "PARENT_FD_ENV",
    "ROLES",
    "SOCKET_FILE",
    "WAKE_DIR",
    "GatewayLocked",
    "Role",
    "main",
    "run_gateway",
    "serve",
]


def run_gateway(
    home: Path,
    role: Role | None = None,
    channel: str | None = None,
    *,
    loaded: LoadedHome | None = None,
) -> int:
    """Run the daemon in the foreground until SIGTERM/SIGINT; returns the exit status.

    Without ``role``, what ``gateway.processes`` says: the agent, scheduler and front
    in this process with the channels that have an SDK of their own in child processes
    (``main``), the supervisor of the role processes (``multi``) or everything in this
    process (``single``). With a role,
    that role alone (``familiar gateway --role ...``); with ``channel`` (``--role channels
    --channel NAME``), that one channel in a process of its own (``per-channel``).

    0 after a clean stop, 78 (EX_CONFIG) for bad configuration, 1 for other failures
    to start (another gateway on this home, unreachable or damaged store...) and when
    the database file is lost while serving. ``loaded``: the home as the supervisor
    prepared it (a role it forked), used instead of reading it again; the single
    process uses the one the supervisor's check read.
    """
    if role is None and channel is None:
        outcome = supervise_or_none(home, main)
        if isinstance(outcome, int):
            return outcome
        loaded = outcome  # "main" or "single": the agent, scheduler and front run here
        children = loaded.config.gateway.processes == "main"
        return asyncio.run(serve(home, loaded=loaded, channel_children=children))
    return asyncio.run(serve(home, role=role, channel=channel, loaded=loaded))


def main(argv: list[str] | None = None, *, loaded: LoadedHome | None = None) -> None:
    """``python -m gateway.daemon [--home DIR] [--role ROLE [--channel NAME] | --migrate]``:
    run in the foreground (``loaded``: see `run_gateway`)."""
    parser = argparse.ArgumentParser(prog="python -m gateway.daemon", description=__doc__)
    parser.add_argument("--home", type=Path, default=None, help="familiar home directory")
    parser.add_argument("--role", choices=ROLES, default=None, help="run only this role")
    parser.add_argument(
        "--channel", default=None, help="with --role channels: run only this channel"
    )
    parser.add_argument(
        "--migrate",
        action="store_true",
        help="only bring the store to the newest migration, then exit (the supervisor does)",
    )
    args = parser.parse_args(argv)
    if args.channel is not None and args.role != "channels":
        parser.error("--channel needs --role channels")
    if args.migrate:
        if args.role is not None:
            parser.error("--migrate runs no role")
        sys.exit(
            asyncio.run(
                migrate_store((args.home or default_home()).expanduser().absolute(), loaded)
            )
        )
    home = args.home or default_home()
    sys.exit(run_gateway(home, role=args.role, channel=args.channel, loaded=loaded))


if __name__ == "__main__":
    main()
