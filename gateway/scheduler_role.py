"""The scheduler role: schedules and the heartbeat check-ins, in whichever process runs it.

Alone in its process (``familiar gateway --role scheduler``, the ``scheduler`` process
of ``multi``, a unit on another host) it fires only while it holds the leader lease in
the database, so that one scheduler fires however many wait. In the main process
(``main``, ``single``) nothing else can fire: it fires at once (``CoreApp.start``
already started the schedules) and delivers check-ins itself.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

from core.app import CoreApp
from core.bus.owner import make_owner, owner_is_dead
from core.bus.wakeups import WakeupService
from core.messages import OutboundMessage
from core.scheduling import HeartbeatService
from core.scheduling.config import SchedulerConfig
from core.scheduling.leader import SchedulerLeader
from core.store.engine import Store
from core.store.leases import Leases

__all__ = ["SchedulerRole"]


class SchedulerRole:
    """Start, stop and report the schedules and the heartbeat.

    Args:
        core: the started core (its schedule service and bus).
        store: the store (the leader lease lives there).
        config: the ``scheduler`` section.
        workspace: the workspace (the heartbeat reads its ``HEARTBEAT.md``).
        deliver: how a check-in reaches its channel.
        wakeups: the process's wake-ups; with them the role contends for the leader
            lease (a process of its own), without it fires at once (the main process).
    """

    def __init__(
        self,
        *,
        core: CoreApp,
        store: Store,
        config: SchedulerConfig,
        workspace: Path,
        deliver: Callable[[OutboundMessage], Awaitable[None]],
        wakeups: WakeupService | None = None,
    ) -> None:
        self._core = core
        self._store = store
        self._config = config
        self._wakeups = wakeups
        self._heartbeat = HeartbeatService(
            config=config.heartbeat,
            scheduler=core.schedules,
            bus=core.bus,
            store=store,
            workspace=workspace,
            deliver=deliver,
        )
        self._leader: SchedulerLeader | None = None

    async def start(self) -> None:
        if self._wakeups is None:
            await self._heartbeat.start()
            return
        schedules, heartbeat = self._core.schedules, self._heartbeat

        async def lead() -> None:
            await schedules.start()
            await heartbeat.start()

        async def follow() -> None:
            await heartbeat.stop()
            await schedules.stop()

        leader = self._leader = SchedulerLeader(
            leases=Leases(store=self._store),
            owner=make_owner(),
            seconds=self._config.leader_lease,
            lead=lead,
            follow=follow,
            resync=schedules.resync,
            is_dead=owner_is_dead,
        )
        self._wakeups.on("schedules", lambda _data, _peer: leader.poke())
        leader.start()

    async def stop(self) -> None:
        """No more firings or check-ins (the lease is given up)."""
        if self._leader is not None:
            await self._leader.stop()
        await self._heartbeat.stop()
        if self._core.schedules.running:
            await self._core.schedules.stop()

    def report(self) -> str:
        """``leader: yes`` or ``leader: no`` (contending), or ``firing`` (main process)."""
        if self._leader is None:
            return "firing"
        return f"leader: {'yes' if self._leader.leading else 'no'}"
