"""Firing schedules: record the next run, publish the prompt, re-arm; catch up after downtime."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime

from core.bus.sql import SqlBus
from core.event_data import ScheduleFired, ScheduleMissed, SessionError
from core.events import Event, EventLog
from core.messages import InboundMessage
from core.scheduling.records import ScheduleInfo, firing_id_for, firing_message_id
from core.scheduling.recurrence import count_missed, next_run_after
from core.scheduling.repository import Fired, ScheduleRepository
from core.scheduling.timer import Problem
from core.scheduling.units import format_duration

__all__ = ["Firing"]

log = logging.getLogger(__name__)

_RETRY_AFTER_ERROR = 30.0
"""Seconds before a schedule whose firing raised is looked at again."""
_BUSY = ("pending", "claimed")


class Firing:
    """Fires due schedules for the service; ``arm`` and ``disarm`` set their next alarms.

    A firing first records the next run on the row (with its ``schedule_fired`` event),
    then publishes the prompt under an id derived from the run, then re-arms: a crash
    in between never fires a run twice, and :meth:`publish_lost` finishes the publish.

    Args:
        rows: the schedule rows.
        bus: where prompts are published and their messages looked up.
        events: the session event log (for firing errors).
        now: aware UTC "now".
        misfire_grace: seconds a run may be late and still fire once.
        arm: sets the alarm of a schedule id to a timestamp.
        disarm: removes the alarm of a schedule id.
    """

    def __init__(
        self,
        *,
        rows: ScheduleRepository,
        bus: SqlBus,
        events: EventLog,
        now: Callable[[], datetime],
        misfire_grace: float,
        arm: Callable[[int, float], None],
        disarm: Callable[[int], None],
    ) -> None:
        self._rows = rows
        self._bus = bus
        self._events = events
        self._now = now
        self._grace = misfire_grace
        self._arm = arm
        self._disarm = disarm

    async def fire(self, schedule_id: int) -> str | None:
        """Fire ``schedule_id`` if due (see :meth:`ScheduleService.fire`)."""
        now = self._now()
        info = await self._rows.get(schedule_id)
        if info is None or info.status != "active" or info.next_run_at is None:
            self._disarm(schedule_id)
            return None
        if info.next_run_at > now.timestamp() + 1.0:
            self._arm(schedule_id, info.next_run_at)  # the row is the truth, not the alarm
            return None
        if await self._still_busy(info):
            await self._skip(info, now, reason="previous firing still queued or running")
            return None
        return await self._fire_due(info, now, late_by=now.timestamp() - info.next_run_at)

    async def catch_up(self, info: ScheduleInfo, now: datetime) -> None:
        """A run that came due while the service was down: fire once within grace, else skip."""
        if info.next_run_at is None:  # an active row without a next run cannot fire again
            await self._rows.finish(info.id)
            return
        late_by = now.timestamp() - info.next_run_at
        if late_by > self._grace:
            grace = format_duration(int(self._grace))
            await self._skip(info, now, reason=f"missed by {late_by:.0f}s (grace {grace})")
            return
        if await self._still_busy(info):
            await self._skip(info, now, reason="previous firing still queued or running")
            return
        await self._fire_due(info, now, late_by=late_by)

    async def publish_lost(self, now: datetime) -> None:
        """Publish recent firings that were recorded but not published (a crash in between)."""
        fired = await self._rows.fired_since(now.timestamp() - self._grace)
        known = await self._bus.message_states([i.running_message_id or "" for i in fired])
        for info in fired:
            if info.running_message_id in known or info.last_firing_id is None:
                continue
            log.warning("publishing a firing lost in a crash id=%d", info.id)
            await self._publish(info, info.last_firing_id, info.running_message_id or "")

    async def recover(self, schedule_id: int, problem: Problem, detail: str) -> None:
        """After a failed, missed or overlapping alarm, put the schedule back on the timer."""
        try:
            info = await self._rows.get(schedule_id)
            if info is None or info.status != "active" or info.next_run_at is None:
                return
            if problem == "error":
                error = SessionError(error=detail, schedule_id=schedule_id)
                await self._events.append(Event(session_key=info.session_key, data=error))
                # Try again later, not at once: the store may be what failed.
                retry = self._now().timestamp() + _RETRY_AFTER_ERROR
                self._arm(schedule_id, max(info.next_run_at, retry))
                return
            now = self._now()
            if info.next_run_at > now.timestamp():
                self._arm(schedule_id, info.next_run_at)
            else:
                await self.catch_up(info, now)
        except Exception:
            log.exception("could not re-arm schedule id=%d; retrying later", schedule_id)
            self._arm(schedule_id, self._now().timestamp() + _RETRY_AFTER_ERROR)

    async def _fire_due(self, info: ScheduleInfo, now: datetime, *, late_by: float) -> str | None:
        stamp, due = _due(info)
        missed = count_missed(info.spec, due, now)
        nxt = next_run_after(info.spec, max(now, due))
        firing_id = firing_id_for(info.id, due)
        fired = Fired(now, firing_id, firing_message_id(firing_id))
        data = ScheduleFired(
            schedule_id=info.id,
            firing_id=firing_id,
            due=due.isoformat(),
            next_run=None if nxt is None else nxt.isoformat(),
            late_s=round(late_by, 3) if late_by > 1.0 else None,
            coalesced_runs=missed if missed > 1 else None,
        )
        event = Event(session_key=info.session_key, message_id=fired.message_id, data=data)
        if not await self._rows.advance(info.id, stamp, next_run=nxt, event=event, fired=fired):
            log.info("schedule changed meanwhile; not firing id=%d", info.id)
            return None
        if nxt is not None:
            self._arm(info.id, nxt.timestamp())
        published = await self._publish(info, firing_id, fired.message_id)
        log.info(
            "schedule fired id=%d session=%s message_id=%s next_run=%s duplicate=%s",
            info.id,
            info.session_key,
            published,
            data.next_run,
            published != fired.message_id,
        )
        return fired.message_id

    async def _skip(self, info: ScheduleInfo, now: datetime, *, reason: str) -> None:
        """Advance past a run that will not fire, and say so in the event log."""
        stamp, due = _due(info)
        nxt = next_run_after(info.spec, max(now, due))
        data = ScheduleMissed(
            schedule_id=info.id,
            due=due.isoformat(),
            reason=reason,
            skipped_runs=count_missed(info.spec, due, now),
            next_run=None if nxt is None else nxt.isoformat(),
        )
        event = Event(session_key=info.session_key, message_id=info.running_message_id, data=data)
        if not await self._rows.advance(info.id, stamp, next_run=nxt, event=event):
            return
        log.warning(
            "schedule run skipped id=%d due=%s reason=%s next_run=%s",
            info.id,
            data.due,
            reason,
            data.next_run,
        )
        if nxt is not None:
            self._arm(info.id, nxt.timestamp())

    async def _publish(self, info: ScheduleInfo, firing_id: str, message_id: str) -> str:
        message = InboundMessage(
            id=message_id,
            session_key=info.session_key,
            text=info.spec.prompt,
            delivery=info.delivery,
            sender=f"schedule #{info.id}",
            origin="schedule",
            event_id=firing_id,
            schedule_id=info.id,
        )
        return (await self._bus.publish_inbound(message)).message_id

    async def _still_busy(self, info: ScheduleInfo) -> bool:
        """Whether the previous firing's message is still queued or running."""
        previous = info.running_message_id
        if previous is None:
            return False
        return (await self._bus.message_states([previous])).get(previous) in _BUSY


def _due(info: ScheduleInfo) -> tuple[float, datetime]:
    """The stored due timestamp (compared as is when advancing) and the same as a datetime."""
    if info.next_run_at is None:
        raise ValueError(f"schedule #{info.id} has no next run")
    return info.next_run_at, datetime.fromtimestamp(info.next_run_at, UTC)
