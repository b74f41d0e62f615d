"""Delegation in group mode, wired: the caller's side, the peer's side, their wake-ups.

Every agent process runs both sides (each step is idempotent, so replicas of one
assistant share the work). The group's NOTIFY wakes them in the process that holds the
group's wake-up connection; the others find the change at their next poll.
"""

from __future__ import annotations

import asyncio
from typing import Any

from core.background import BackgroundTask
from core.bus.sql import SqlBus
from core.events import EventLog
from core.group.delegate import GroupDelegation
from core.group.peer_tasks import PeerTaskService
from core.group.service import GroupService
from core.group.task_rows import TASK_NOTE, GroupTasks
from core.store.engine import Store
from core.tools.subagents_config import SubagentsConfig

__all__ = ["Delegation"]

_ATTACH_POLL = 0.5


class Delegation:
    """Delegation to and from this member's peers.

    Args:
        store: this assistant's store.
        bus: this assistant's bus.
        events: this assistant's event log.
        group: this member's group service (name, roster, settings, wake-ups).
        subagents: ``[tools.subagents]`` (depth cap, sync timeout, result size).
    """

    def __init__(
        self,
        *,
        store: Store,
        bus: SqlBus,
        events: EventLog,
        group: GroupService,
        subagents: SubagentsConfig,
    ) -> None:
        self._group = group
        config = group.config
        tasks = GroupTasks(store=store)
        self.peers = GroupDelegation(
            store=store,
            bus=bus,
            events=events,
            roster=group.roster,
            tasks=tasks,
            name=group.name,
            subagents=subagents,
            lease=config.expire_after,
        )
        """What ``sessions_spawn`` and ``agents_list`` use (`core.tasks.peers.Peers`)."""
        self.intake = PeerTaskService(
            store=store,
            bus=bus,
            events=events,
            tasks=tasks,
            roster=group.roster,
            name=group.name,
            accept_from=config.accept_from,
            max_running_per_caller=config.max_running_per_caller,
            lease=config.expire_after,
            renew_every=config.heartbeat,
            retention_days=config.retention_days,
        )
        self._attach = BackgroundTask("familiar-group-listen")

    async def start(self) -> None:
        await self._group.roster.ensure_tables()
        await self.peers.start()
        await self.intake.start()
        self._attach.start(self._listen)

    async def stop(self) -> None:
        await self._attach.stop()
        await self.intake.stop()
        await self.peers.stop()

    async def _listen(self) -> None:
        """Subscribe to the group's notes once its wake-up connection exists (the
        gateway opens it after the agent side started; a process without it polls)."""
        while True:
            signals = self._group.signals
            if signals is not None:
                signals.on(self._note)
                return
            await asyncio.sleep(_ATTACH_POLL)

    def _note(self, note: dict[str, Any]) -> None:
        if note.get("kind") == TASK_NOTE:
            self.peers.poke()
            self.intake.poke()
