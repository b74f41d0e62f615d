"""ScheduleService: the schedule rows (repository) and their alarms (timer), kept in step."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

import tzlocal

from core.bus.sql import SqlBus
from core.events import EventLog
from core.messages import Delivery, InboundMessage, utcnow
from core.scheduling.config import SchedulerConfig
from core.scheduling.firing import Firing
from core.scheduling.records import ScheduleInfo, ScheduleSpec, ScheduleTarget
from core.scheduling.recurrence import creation_anchor, next_run_after
from core.scheduling.repository import ScheduleRepository
from core.scheduling.timer import Timer
from core.store.engine import Store

__all__ = ["ScheduleService", "target_for_session"]

log = logging.getLogger(__name__)

Clock = Callable[[], datetime]


async def target_for_session(bus: SqlBus, session_key: str) -> ScheduleTarget:
    """A target for a session named from outside (control API, heartbeat ``deliver_to``).

    Replies go where the session's latest user message came from; a session without one
    gets ``channel`` = the key's prefix and ``chat_id`` = the rest (``cli:NAME`` -> cli, NAME).
    """
    delivery = await bus.last_user_delivery(session_key)
    if delivery is None:
        channel, _, chat = session_key.partition(":")
        delivery = Delivery(channel=channel, chat_id=chat)
    return ScheduleTarget(session_key, delivery)


class ScheduleService:
    """Creates, lists, cancels and fires schedules; the timer only keeps the time.

    Each active row has one alarm at its ``next_run_at`` that calls :meth:`fire`; a
    firing first records the next run, then publishes the prompt, then re-arms. Run
    exactly one started service per database (with several processes, only the
    scheduler role starts it).

    Args:
        config: the ``[scheduler]`` section.
        store: the open store.
        bus: where firings are published and their messages looked up.
        events: the session event log.
        clock: aware "now" (injected by tests).
    """

    def __init__(
        self,
        *,
        config: SchedulerConfig,
        store: Store,
        bus: SqlBus,
        events: EventLog,
        clock: Clock = utcnow,
    ) -> None:
        self.config = config
        self._rows = ScheduleRepository(store=store)
        self._bus = bus
        self._clock = clock
        self.default_timezone = config.timezone or _host_zone()
        self._timer: Timer | None = None
        self.on_change: Callable[[], None] | None = None
        """Called after a schedule is created or cancelled here (tells other processes)."""
        self._firing = Firing(
            rows=self._rows,
            bus=bus,
            events=events,
            now=self.now,
            misfire_grace=config.misfire_grace,
            arm=self._arm,
            disarm=self._disarm,
        )

    def now(self) -> datetime:
        """The service's current time (aware UTC)."""
        return self._clock().astimezone(UTC)

    @property
    def running(self) -> bool:
        return self._timer is not None

    @property
    def timer(self) -> Timer | None:
        """The running timer (None when stopped)."""
        return self._timer

    # -- lifecycle -----------------------------------------------------------------------

    async def start(self) -> None:
        """Load active rows, fire or skip runs missed while down, arm the rest."""
        if self._timer is not None:
            return
        timer = self._timer = Timer(
            fire=self.fire, on_problem=self._firing.recover, misfire_grace=self.config.misfire_grace
        )
        try:
            await self._load(timer)
        except BaseException:
            self._timer = None
            await timer.stop()
            raise

    async def _load(self, timer: Timer) -> None:
        now = self.now()
        await self._firing.publish_lost(now)
        runs = await self._rows.next_runs()
        late = []
        for schedule_id, next_run_at in runs:
            if next_run_at is not None and next_run_at > now.timestamp():
                timer.arm(schedule_id, next_run_at)
            else:
                late.append(schedule_id)
        timer.start()
        for schedule_id in late:
            info = await self._rows.get(schedule_id)
            if info is not None and info.status == "active":
                await self._firing.catch_up(info, now)
        log.info(
            "scheduler started schedules=%d late=%d timezone=%s",
            len(runs),
            len(late),
            self.default_timezone,
        )

    async def stop(self) -> None:
        """Stop the timer; firings already running finish on their own."""
        timer, self._timer = self._timer, None
        if timer is None:
            return
        await timer.stop()
        log.info("scheduler stopped")

    async def resync(self) -> None:
        """Re-read the rows and re-arm: schedules created or cancelled by other processes.

        A row due with no alarm (created elsewhere for a time already past) fires now.
        """
        timer = self._timer
        if timer is None:
            return
        runs = dict(await self._rows.next_runs())
        now = self.now().timestamp()
        for schedule_id in timer.armed() - runs.keys():
            timer.disarm(schedule_id)
        for schedule_id, next_run_at in runs.items():
            if next_run_at is None:
                continue
            job = timer.job(schedule_id)
            if next_run_at > now:
                if (
                    job is None
                    or job.next_run_time is None
                    or (abs(job.next_run_time.timestamp() - next_run_at) > 0.001)
                ):
                    timer.arm(schedule_id, next_run_at)
            elif job is None:
                await self._firing.fire(schedule_id)

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change()

    def add_interval_job(
        self, name: str, func: Callable[[], Awaitable[object]], *, seconds: float
    ) -> None:
        """Run an internal coroutine function every ``seconds`` (e.g. the heartbeat)."""
        if self._timer is None:
            raise RuntimeError("start the ScheduleService first")
        self._timer.add_interval_job(name, func, seconds=seconds)

    # -- the API -------------------------------------------------------------------------

    async def create(
        self,
        origin: InboundMessage | ScheduleTarget,
        spec: ScheduleSpec,
        *,
        message_id: str | None = None,
    ) -> ScheduleInfo:
        """Store a validated schedule for the origin's session and arm it.

        Args:
            origin: the message that asked for it (replies go to its chat and thread),
                or an explicit target.
            spec: from :func:`core.scheduling.spec.parse_command` or ``validate_spec``.
            message_id: the inbound message that asked (for the event log, and to make
                a redelivered request idempotent); defaults to ``origin``'s id when it is
                a message.

        Returns:
            The new schedule (its ``id`` is shown to users as ``#id``).

        Raises:
            CommandError: the session has ``scheduler.max_per_session`` active schedules.
        """
        if isinstance(origin, InboundMessage):
            target = ScheduleTarget(origin.session_key, origin.delivery)
            message_id = origin.id if message_id is None else message_id
        else:
            target = origin
        now = self.now()
        anchor = creation_anchor(spec, now)
        first = next_run_after(spec, now, anchor=anchor) if spec.kind == "cron" else spec.run_at
        info = await self._rows.create(
            target,
            spec,
            now=now,
            anchor=anchor,
            first_run=first,
            message_id=message_id,
            max_active=self.config.max_per_session,
        )
        if info.next_run_at is not None:
            self._arm(info.id, info.next_run_at)
        self._changed()
        log.info("schedule created id=%d session=%s %s", info.id, info.session_key, info.describe())
        return info

    async def target_for(self, session_key: str) -> ScheduleTarget:
        """A target for a session named from outside (see :func:`target_for_session`)."""
        return await target_for_session(self._bus, session_key)

    async def get(self, schedule_id: int) -> ScheduleInfo | None:
        """One schedule in any status, or None."""
        return await self._rows.get(schedule_id)

    async def list(self, session_key: str | None = None) -> list[ScheduleInfo]:
        """Active schedules, oldest first; only ``session_key``'s when given."""
        return await self._rows.list(session_key)

    async def cancel(
        self, schedule_id: int, session_key: str | None = None, *, message_id: str | None = None
    ) -> ScheduleInfo | None:
        """Cancel an active schedule (only if it belongs to ``session_key``, when given).

        Returns:
            The cancelled schedule, or None when there is no such active schedule.
        """
        info = await self._rows.cancel(schedule_id, session_key, message_id=message_id)
        if info is None:
            return None
        self._disarm(schedule_id)
        self._changed()
        log.info("schedule cancelled id=%d session=%s", schedule_id, info.session_key)
        return info

    # -- firing --------------------------------------------------------------------------

    async def fire(self, schedule_id: int) -> str | None:
        """Fire a due schedule: record the next run, then publish its prompt.

        What the timer calls (this bound method is the job itself); tests call it directly
        with an injected clock. Not-yet-due, finished and cancelled schedules are left
        alone, and a firing whose previous message is still queued or running is skipped.

        Returns:
            The id of the published inbound message, or None when nothing was published.
        """
        return await self._firing.fire(schedule_id)

    def _arm(self, schedule_id: int, when: float) -> None:
        if self._timer is not None:
            self._timer.arm(schedule_id, when)

    def _disarm(self, schedule_id: int) -> None:
        if self._timer is not None:
            self._timer.disarm(schedule_id)


def _host_zone() -> str:
    try:
        name = tzlocal.get_localzone_name()
    except Exception:  # no zone configured on the host: UTC is the honest default
        return "UTC"
    return name or "UTC"
