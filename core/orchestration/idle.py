"""Consolidation by itself: rem-agent for sessions idle for ``memory.consolidate_after_idle``.

Off by default. When set, a session that has been idle that long and has had new
activity since its last consolidation gets a background rem-agent, at most once per
period: the time is claimed with a compare-and-set on the session's mode row, so of
several agent processes one starts it. Its answer is recorded, never handed back as
a message: nobody asked, so the channel gets nothing.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable

from core.background import BackgroundTask
from core.errors import TaskRefused
from core.messages import Delivery, InboundMessage
from core.orchestration.commands import REM_DESCRIPTION, consolidation_request
from core.orchestration.consolidate import REM_AGENT
from core.orchestration.modes import SessionModes
from core.sessions import SessionStore
from core.tasks.collector import SUBAGENT_CHANNEL
from core.tasks.profiles import SUBAGENT_PREFIX
from core.tasks.registry import SpawnRequest, TaskRegistry
from core.tools.lineage import LOCAL_CLI_CHANNEL

__all__ = ["IdleConsolidator"]

log = logging.getLogger(__name__)

_SKIPPED_CHANNELS = frozenset({"subagent", "heartbeat"})
_MAX_POLL = 60.0
_SESSIONS_SCANNED = 1000


class IdleConsolidator:
    """Starts rem-agent for idle sessions; `tick` is one pass (the loop calls it)."""

    def __init__(
        self,
        *,
        period: float,
        sessions: SessionStore,
        modes: SessionModes,
        registry: TaskRegistry,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.period = period
        self._sessions = sessions
        self._modes = modes
        self._registry = registry
        self._clock = clock
        self._loop_task = BackgroundTask("familiar-idle-consolidation")

    async def start(self) -> None:
        if self.period > 0:
            self._loop_task.start(self._loop)

    async def stop(self) -> None:
        await self._loop_task.stop()

    async def _loop(self) -> None:
        poll = min(max(self.period / 4, 1.0), _MAX_POLL)
        while True:
            try:
                await self.tick()
            except Exception:
                log.exception("idle consolidation pass failed")
            await asyncio.sleep(poll)

    async def tick(self) -> list[str]:
        """Start rem-agent for every session due now; returns the agents' ids."""
        if self.period <= 0:
            return []
        now, started = self._clock(), []
        for info in await self._sessions.list_sessions(limit=_SESSIONS_SCANNED):
            if info.key.startswith(SUBAGENT_PREFIX) or info.channel in _SKIPPED_CHANNELS:
                continue
            if info.updated_at > now - self.period:
                continue  # not idle long enough
            last = await self._modes.consolidated_at(info.key)
            if last is not None and last >= info.updated_at:
                continue  # nothing new since the last consolidation
            if not await self._modes.claim_consolidation(info.key, period=self.period):
                continue  # done less than a period ago (maybe by another process)
            prompt = consolidation_request(info.key)
            parent = InboundMessage(
                id=f"idle-consolidation:{uuid.uuid4().hex}",
                session_key=info.key,
                text=prompt,
                delivery=Delivery(channel=_root_channel(info.channel)),
                origin="system",
            )
            try:
                task, _ = await self._registry.spawn(
                    SpawnRequest(
                        owner_key=info.key,
                        owner_depth=0,
                        agent_type=REM_AGENT,
                        prompt=prompt,
                        description=REM_DESCRIPTION,
                        mode="background",
                        parent=parent,
                        handoff=False,
                    )
                )
            except TaskRefused as exc:
                log.warning("idle consolidation not started session=%s: %s", info.key, exc)
                continue
            log.info("idle consolidation started session=%s agent_id=%s", info.key, task.id)
            started.append(task.id)
        return started


def _root_channel(channel: str) -> str:
    """The root channel of a rem-agent nobody's message started: the session's, whose
    ``tools.policy`` binds every agent the session starts (`Lineage`); for the local CLI
    none (`SUBAGENT_CHANNEL`, which relaxes nothing), since no operator is at the keyboard
    and an unattended run must not count as the operator's own."""
    return SUBAGENT_CHANNEL if channel == LOCAL_CLI_CHANNEL else channel
