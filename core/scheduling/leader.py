"""The scheduler leader: schedules fire only in the process holding the DB lease.

Every process that may run the scheduler (each ``--role scheduler``, on any host)
contends for the ``scheduler`` lease; the holder starts its `ScheduleService` (and
the heartbeat), renews the lease every third of ``scheduler.leader_lease`` seconds,
and re-reads the schedule rows on each renewal and whenever another process says
they changed. When the holder dies, its lease runs out and another contender takes
over within ``leader_lease`` seconds (at once when the holder is a dead process on
the same host). Firing itself stays a conditional write on the row, so even two
leaders for a moment (a paused holder) could not fire one run twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable

from core.background import BackgroundTask
from core.store.leases import Leases

__all__ = ["LEADER_LEASE", "SchedulerLeader"]

log = logging.getLogger(__name__)

LEADER_LEASE = "scheduler"
"""The name of the scheduler's lease in the ``leases`` table."""


class SchedulerLeader:
    """Contends for the scheduler lease; runs ``lead`` while held, ``follow`` when lost.

    Args:
        leases: the lease table.
        owner: this process's lease owner id (`core.bus.owner.make_owner`).
        seconds: the lease length (``scheduler.leader_lease``).
        lead: starts firing (called once per gain of the lease).
        follow: stops firing (called once per loss, and on stop while leading).
        resync: re-reads the schedule rows (called while leading, per renewal and
            per `poke`).
        is_dead: tells a holder that is a dead process on this host.
    """

    def __init__(
        self,
        *,
        leases: Leases,
        owner: str,
        seconds: float,
        lead: Callable[[], Awaitable[None]],
        follow: Callable[[], Awaitable[None]],
        resync: Callable[[], Awaitable[None]],
        is_dead: Callable[[str], bool] | None = None,
    ) -> None:
        self._leases = leases
        self._owner = owner
        self._seconds = seconds
        self._lead = lead
        self._follow = follow
        self._resync = resync
        self._is_dead = is_dead
        self._task = BackgroundTask("scheduler-leader")
        self._poked = asyncio.Event()
        self.leading = False
        self._held_until = 0.0

    def start(self) -> None:
        self._task.start(self._loop)

    def poke(self) -> None:
        """Schedule rows changed elsewhere: re-read them now (if leading)."""
        self._poked.set()

    async def stop(self) -> None:
        await self._task.stop()
        if self.leading:
            self.leading = False
            await self._follow()
            with contextlib.suppress(Exception):
                await self._leases.release(LEADER_LEASE, self._owner)
            log.info("scheduler leadership released owner=%s", self._owner)

    async def _loop(self) -> None:
        while True:
            await self._round()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._seconds / 3):
                    await self._poked.wait()
            if self._poked.is_set():
                self._poked.clear()
                if self.leading:
                    await self._safe(self._resync, "re-reading schedules")

    async def _round(self) -> None:
        started = time.monotonic()
        try:
            held = await self._leases.acquire(
                LEADER_LEASE, self._owner, seconds=self._seconds, is_dead=self._is_dead
            )
        except Exception as exc:
            log.warning("scheduler lease check failed: %s", exc)
            # Keep leading only while the lease we hold has not run out.
            held = self.leading and time.monotonic() < self._held_until
        else:
            if held:
                self._held_until = started + self._seconds
        if held and not self.leading:
            self.leading = True
            log.info("scheduler leadership taken owner=%s", self._owner)
            await self._safe(self._lead, "starting the scheduler")
        elif held:
            await self._safe(self._resync, "re-reading schedules")
        elif self.leading:
            self.leading = False
            log.warning("scheduler leadership lost owner=%s", self._owner)
            await self._safe(self._follow, "stopping the scheduler")

    async def _safe(self, step: Callable[[], Awaitable[None]], what: str) -> None:
        try:
            await step()
        except Exception:
            log.exception("scheduler leader: %s failed", what)
