"""The MCP servers of every agent process, in the store, for the process that answers.

In multi mode MCP servers run in the agent processes, while ``familiar status`` and
``familiar mcp list`` are answered by the channels process: each agent process writes
its view (one ``mcp_status`` row per server, owner ``host/pid/start``) whenever it
changes and every `HEARTBEAT` seconds; the reader leaves out processes that are gone
(dead on this host, or silent for `STALE_AFTER` elsewhere) and merges the rest.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict
from typing import Any

from sqlalchemy import Connection, delete, insert, select
from sqlalchemy.exc import SQLAlchemyError

from core.bus.owner import make_owner, owner_is_dead
from core.errors import StoreError
from core.store.engine import Store
from core.store.models import McpStatusRow

from .manager import McpManager, ServerStatus

__all__ = ["HEARTBEAT", "STALE_AFTER", "McpBoard", "McpPublisher", "merge_views"]

log = logging.getLogger(__name__)

HEARTBEAT = 60.0
"""Seconds between two writes of a process's rows when nothing changed."""
STALE_AFTER = 3 * HEARTBEAT
"""Rows not refreshed for this long belong to a process that is gone (another host's)."""
_NAME_MAX = 128
_RANK = {"failed": 0, "ready": 1, "starting": 2, "stopped": 3, "disabled": 4}
"""Which process's state a merged server shows: a failure anywhere first."""

_table = McpStatusRow.__table__  # type: ignore[attr-defined]


def merge_views(views: Iterable[tuple[str, Mapping[str, Any]]]) -> list[dict[str, Any]]:
    """One entry per server from the views of several processes (``(process, status)``).

    Each entry is the status of the process whose state ranks first (failed, ready,
    starting, stopped), with ``starts`` summed over the processes and ``processes``:
    every process's ``process``, ``state``, ``error`` and ``starts``.
    """
    by_name: dict[str, list[tuple[str, Mapping[str, Any]]]] = {}
    for process, status in views:
        by_name.setdefault(str(status.get("name")), []).append((process, status))
    merged: list[dict[str, Any]] = []
    for name in sorted(by_name):
        seen = sorted(by_name[name], key=lambda v: (_RANK.get(str(v[1].get("state")), 9), v[0]))
        first = dict(seen[0][1])
        first["starts"] = sum(int(s.get("starts") or 0) for _, s in seen)
        first["processes"] = [
            {
                "process": p,
                "state": s.get("state"),
                "error": s.get("error"),
                "starts": s.get("starts"),
            }
            for p, s in sorted(seen)
        ]
        merged.append(first)
    return merged


class McpBoard:
    """The ``mcp_status`` table: written by agent processes, read by the front.

    Args:
        store: the gateway's store.
        owner: this process (``host/pid/start``; default: this process's).
        clock: unix seconds.
    """

    def __init__(
        self,
        store: Store,
        *,
        owner: str | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._store = store
        self.owner = owner or make_owner()
        self._clock = clock

    async def publish(self, statuses: Sequence[ServerStatus]) -> None:
        """Replace this process's rows with ``statuses`` (one transaction)."""
        now = self._clock()
        rows = [
            {
                "owner": self.owner,
                "name": s.name[:_NAME_MAX],
                "data": json.dumps(asdict(s)),
                "updated_at": now,
            }
            for s in statuses
        ]

        def job(conn: Connection) -> None:
            conn.execute(delete(_table).where(_table.c.owner == self.owner))
            if rows:
                conn.execute(insert(_table), rows)

        await self._store.transact(job)

    async def sweep(self, *, is_dead: Callable[[str], bool] = owner_is_dead) -> int:
        """Delete the rows of processes that are gone (killed before they could
        `withdraw`); returns how many."""
        owners = await self._store.fetch(select(_table.c.owner).distinct())
        gone = [str(r["owner"]) for r in owners if is_dead(str(r["owner"]))]
        oldest = self._clock() - STALE_AFTER

        def job(conn: Connection) -> int:
            stale = _table.c.updated_at < oldest
            where = stale | _table.c.owner.in_(gone) if gone else stale
            return int(conn.execute(delete(_table).where(where)).rowcount or 0)

        return await self._store.transact(job)

    async def withdraw(self) -> None:
        """Delete this process's rows (it stops)."""
        await self._store.transact(
            lambda conn: conn.execute(delete(_table).where(_table.c.owner == self.owner))
        )

    async def views(
        self, *, is_dead: Callable[[str], bool] = owner_is_dead
    ) -> list[tuple[str, dict[str, Any]]]:
        """``(owner, status)`` of every server of every process that still runs."""
        rows = await self._store.fetch(
            select(_table.c.owner, _table.c.data, _table.c.updated_at).order_by(
                _table.c.owner, _table.c.name
            )
        )
        oldest = self._clock() - STALE_AFTER
        dead: dict[str, bool] = {}
        found: list[tuple[str, dict[str, Any]]] = []
        for row in rows:
            owner = str(row["owner"])
            if owner not in dead:
                dead[owner] = is_dead(owner)
            if dead[owner] or float(row["updated_at"]) < oldest:
                continue
            with contextlib.suppress(ValueError):
                data = json.loads(row["data"])
                if isinstance(data, dict):
                    found.append((owner, data))
        return found


class McpPublisher:
    """Keeps this process's rows on the board current: written at start, after each
    change of the manager's servers (changes that come during a write are coalesced
    into the next one) and every `HEARTBEAT` seconds."""

    def __init__(self, manager: McpManager, board: McpBoard, *, heartbeat: float = HEARTBEAT):
        self._manager = manager
        self._board = board
        self._heartbeat = heartbeat
        self._dirty = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        manager.on_change(self._dirty.set)

    async def start(self) -> None:
        """Write the rows once (the front sees every server at once), then keep them."""
        with contextlib.suppress(StoreError, SQLAlchemyError):
            await self._board.sweep()
        await self._write()
        self._task = asyncio.create_task(self._run(), name="mcp:publish")

    async def stop(self) -> None:
        """Stop writing and delete the rows."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        with contextlib.suppress(StoreError, SQLAlchemyError):
            await self._board.withdraw()

    async def _run(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._heartbeat):
                    await self._dirty.wait()
            self._dirty.clear()
            await self._write()

    async def _write(self) -> None:
        try:
            await self._board.publish(self._manager.status())
        except (StoreError, SQLAlchemyError) as exc:
            log.warning("mcp status not published: %s", exc)  # the next change retries
