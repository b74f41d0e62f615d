"""Group membership of this assistant: announce, heartbeat, leave, notice expiries.

One process of a gateway runs it (the one with the control socket). Every heartbeat
writes a fresh snapshot, records the peers that went silent as ``group.expired``, and
prunes the timeline past its retention. Between heartbeats the snapshot is taken
again every `CHANGE_CHECK` seconds, without writing: when tools, agents, skills or
the identity changed (a reload), it is announced at once (``group.updated``). Peers'
notes wake `wait_change`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy.exc import SQLAlchemyError

from core.errors import FamiliarError
from core.group.config import GroupConfig
from core.group.identity import CapabilitySources, identity_excerpt, take_snapshot
from core.group.roster import Roster, Snapshot
from core.group.signals import GroupSignals
from core.group.timeline import Timeline
from core.messages import utcnow
from core.store.engine import Store

__all__ = ["GroupService"]

log = logging.getLogger(__name__)

CHANGE_CHECK = 2.0
"""Seconds between two looks at the tools, agents, skills and identity files (in
memory, and a ``stat`` of the files at most): a change is announced at once, not at
the next heartbeat."""


class GroupService:
    """This assistant in the group.

    Args:
        store: the assistant's open store (PostgreSQL).
        url: the store's URL (the wake-up connection opens its own).
        config: the ``[group]`` section.
        name: this member's name (``group.name`` or ``agent.name``).
        workspace: where ``IDENTITY.md`` and ``SOUL.md`` are read from.
        sources: where its tools, agents and skills are read from (channels: `start`).
    """

    def __init__(
        self,
        *,
        store: Store,
        url: str,
        config: GroupConfig,
        name: str,
        workspace: Path,
        sources: CapabilitySources,
    ) -> None:
        self.store = store
        self.url = url
        self.config = config
        self.name = name
        self.workspace = workspace
        self.roster = Roster(store, expire_after=config.expire_after)
        self.timeline = Timeline(store)
        self.signals: GroupSignals | None = None
        self.started_at: datetime | None = None
        self.last_beat: datetime | None = None
        self._sources = sources
        self._version = ""
        self._loop: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._changed = asyncio.Event()
        self._announced: dict[str, Any] = {}

    @property
    def running(self) -> bool:
        return self._loop is not None and not self._loop.done()

    async def start(self, *, version: str, channels: Sequence[str] = ()) -> None:
        """Join: create the shared tables if missing, announce, start the heartbeat.

        ``channels``: the enabled channels of this gateway (announced with ``share``).

        Raises:
            ConfigError: an active member of another assistant has this name.
        """
        self._version = version
        self._sources = replace(self._sources, channels=tuple(channels))
        await self.roster.ensure_tables()
        self.started_at = utcnow()
        snapshot = await self._snapshot()
        await self._announce(snapshot, starting=True)  # ConfigError: the name is taken
        self.signals = GroupSignals(self.url, self.name)
        self.signals.on(self._note)
        await self.signals.start()
        await self._notify("group.joined", member=self.name)
        self._loop = asyncio.create_task(self._run(), name="group-heartbeat")
        log.info("group joined name=%s heartbeat=%gs", self.name, self.config.heartbeat)

    def refresh(self) -> None:
        """Announce now instead of at the next heartbeat."""
        self._wake.set()

    async def wait_change(self, timeout: float) -> bool:
        """Wait until a peer's note arrives (True) or ``timeout`` passes (False)."""
        self._changed.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._changed.wait(), timeout)
            return True
        return False

    async def beat(self, snapshot: Snapshot | None = None) -> None:
        """One heartbeat: announce, record silent peers, prune the timeline and the
        roster past their retention."""
        await self._announce(snapshot or await self._snapshot(), starting=False)
        expired = await self.roster.expire_stale()
        for name in expired:
            log.info("group member expired name=%s", name)
            await self._notify("group.expired", member=name)
        await self.timeline.prune(self.config.retention_days)
        for name in await self.roster.forget_departed(self.config.retention_days):
            log.info("group member forgotten name=%s", name)

    async def stop(self) -> None:
        """Leave (a graceful stop): ``group.left`` unless another replica of this
        assistant runs on, then close the wake-up connection."""
        loop, self._loop = self._loop, None
        if loop is not None:
            loop.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await loop
            try:
                if self.signals is not None and not await self.signals.last_replica():
                    log.info("group: another replica of %s runs on; not leaving", self.name)
                else:
                    if await self.roster.leave(self.name):
                        await self._notify("group.left", member=self.name)
                    log.info("group left name=%s", self.name)
            except (FamiliarError, SQLAlchemyError, OSError) as exc:
                log.warning("group leave not recorded: %s", exc)
        if self.signals is not None:
            await self.signals.stop()
            self.signals = None

    async def report(self) -> dict[str, Any]:
        """This member and the others, for ``familiar status`` (JSON-ready)."""
        members = await self.roster.members()
        return {
            "name": self.name,
            "joined": self.running,
            "store_schema": self.store.schema,
            "heartbeat_s": self.config.heartbeat,
            "last_beat": self.last_beat.isoformat() if self.last_beat else None,
            "accept_from": list(self.config.accept_from),
            "members": [{"name": m.name, "state": m.state, "host": m.host} for m in members],
        }

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        due = loop.time() + self.config.heartbeat
        while True:
            with contextlib.suppress(TimeoutError):
                wait = min(CHANGE_CHECK, max(due - loop.time(), 0.0))
                await asyncio.wait_for(self._wake.wait(), wait)
            woken = self._wake.is_set()
            self._wake.clear()
            try:
                snapshot = await self._snapshot()
                if loop.time() >= due:
                    due = loop.time() + self.config.heartbeat
                    await self.beat(snapshot)
                elif woken or snapshot.announced() != self._announced:
                    await self._announce(snapshot, starting=False)  # a reload: tell it now
            except (FamiliarError, SQLAlchemyError, OSError) as exc:
                log.warning("group heartbeat failed: %s", exc)

    async def _snapshot(self) -> Snapshot:
        assert self.started_at is not None
        identity = await asyncio.to_thread(identity_excerpt, self.workspace)
        return await take_snapshot(
            name=self.name,
            config=self.config,
            identity=identity,
            version=self._version,
            sources=self._sources,
            store_schema=self.store.schema,
            started_at=self.started_at,
        )

    async def _announce(self, snapshot: Snapshot, *, starting: bool) -> None:
        kind = await self.roster.announce(snapshot, starting=starting)
        self._announced = snapshot.announced()
        self.last_beat = utcnow()
        if kind is not None:
            log.info("group %s name=%s", kind, self.name)
            await self._notify(kind, member=self.name)

    async def _notify(self, kind: str, **fields: Any) -> None:
        if self.signals is not None:
            await self.signals.notify(kind, **fields)

    def _note(self, note: dict[str, Any]) -> None:
        self._changed.set()
