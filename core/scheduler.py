"""ScheduleService: scheduled prompts on APScheduler 3, with our schedule rows as the truth."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

import tzlocal
from apscheduler.events import (
    EVENT_JOB_ERROR,
    EVENT_JOB_MAX_INSTANCES,
    EVENT_JOB_MISSED,
    JobEvent,
    JobExecutionEvent,
)
from apscheduler.jobstores.base import JobLookupError
from apscheduler.jobstores.memory import MemoryJobStore
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.date import DateTrigger
from apscheduler.triggers.interval import IntervalTrigger
from sqlalchemy import Connection, Table, insert, or_, update
from sqlalchemy import select as sa_select
from sqlmodel import col, select

from core.bus.sql import SqlBus
from core.events import Event, EventLog, EventType
from core.messages import Delivery, InboundMessage, utcnow
from core.schedule_records import (
    ScheduleInfo,
    ScheduleTarget,
    event_data,
    firing_id_for,
    firing_message_id,
    from_timestamp,
    info_of_row,
    spec_of_row,
)
from core.schedule_spec import (
    ScheduleSpec,
    format_duration,
    next_run_after,
)
from core.scheduler_config import HeartbeatConfig, SchedulerConfig, parse_active_hours
from core.store.engine import Store
from core.store.models import EventRow, InboundRow, ScheduleRow

__all__ = [
    "HeartbeatConfig",
    "ScheduleInfo",
    "ScheduleService",
    "ScheduleTarget",
    "SchedulerConfig",
    "fire_schedule",
    "firing_id_for",
    "firing_message_id",
    "last_delivery",
    "parse_active_hours",
    "target_for_session",
]

log = logging.getLogger(__name__)

Clock = Callable[[], datetime]
_RETRY_AFTER_ERROR = 30.0
"""Seconds before a schedule whose firing raised is looked at again."""
_IN_CHUNK = 500
_schedules: Table = ScheduleRow.__table__  # type: ignore[attr-defined]
_RUNNING: dict[str, ScheduleService] = {}
"""Started services by name: APScheduler jobs hold a plain callable, not the service."""


async def fire_schedule(schedule_id: int, service: str = "default") -> None:
    """The one APScheduler job callable: fires ``schedule_id`` on the running service."""
    running = _RUNNING.get(service)
    if running is None:
        log.warning("schedule fired with no running service schedule_id=%d", schedule_id)
        return
    await running.fire(schedule_id)


async def last_delivery(store: Store, session_key: str) -> Delivery | None:
    """The delivery of the latest user message of ``session_key``, if there is one."""
    query = (
        select(InboundRow.payload)
        .where(col(InboundRow.session_key) == session_key)
        .order_by(col(InboundRow.seq).desc())
        .limit(20)
    )
    async with store.read() as s:
        payloads = (await s.exec(query)).all()
    for payload in payloads:
        message = InboundMessage.model_validate_json(payload)
        if message.origin == "user":
            return message.delivery
    return None


async def target_for_session(store: Store, session_key: str) -> ScheduleTarget:
    """A target for a session named from outside (control API, heartbeat ``deliver_to``).

    Replies go where the session's latest user message came from; a session without one
    gets ``channel`` = the key's prefix and ``chat_id`` = the rest (``cli:NAME`` -> cli, NAME).
    """
    delivery = await last_delivery(store, session_key)
    if delivery is None:
        channel, _, chat = session_key.partition(":")
        delivery = Delivery(channel=channel, chat_id=chat)
    return ScheduleTarget(session_key, delivery)


class ScheduleService:
    """Creates, lists, cancels and fires schedules; APScheduler only keeps the time.

    Each active row is one in-memory APScheduler job (a DateTrigger at the row's
    ``next_run_at``) that calls :func:`fire_schedule`; a firing first records the next
    run, then publishes the prompt, then re-arms the job. Run exactly one started
    service per database (with several processes, only the scheduler role starts it).

    Args:
        config: the ``[scheduler]`` section.
        store: the open store.
        bus: where firings are published.
        events: the session event log.
        clock: aware "now" (injected by tests).
        name: key in the module registry :func:`fire_schedule` resolves.
    """

    def __init__(
        self,
        *,
        config: SchedulerConfig,
        store: Store,
        bus: SqlBus,
        events: EventLog,
        clock: Clock = utcnow,
        name: str = "default",
    ) -> None:
        self.config = config
        self._store = store
        self._bus = bus
        self._events = events
        self._clock = clock
        self.name = name
        self.default_timezone = config.timezone or _host_zone()
        self._scheduler: AsyncIOScheduler | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    def now(self) -> datetime:
        """The service's current time (aware UTC)."""
        return self._clock().astimezone(UTC)

    @property
    def running(self) -> bool:
        return self._scheduler is not None

    # -- lifecycle -----------------------------------------------------------------------

    async def start(self) -> None:
        """Load active rows, fire or skip runs missed while down, arm the rest."""
        if self._scheduler is not None:
            return
        if _RUNNING.get(self.name) is not None:
            raise RuntimeError(f"a ScheduleService named {self.name!r} is already running")
        self._scheduler = AsyncIOScheduler(
            jobstores={"default": MemoryJobStore()},
            job_defaults={
                "coalesce": True,
                "max_instances": 1,
                "misfire_grace_time": max(1, int(self.config.misfire_grace)),
            },
            timezone=UTC,
        )
        self._scheduler.add_listener(
            self._on_job_event, EVENT_JOB_ERROR | EVENT_JOB_MISSED | EVENT_JOB_MAX_INSTANCES
        )
        _RUNNING[self.name] = self
        try:
            await self._load()
        except BaseException:
            scheduler, self._scheduler = self._scheduler, None
            _RUNNING.pop(self.name, None)
            if scheduler.running:
                scheduler.shutdown(wait=False)
            raise

    async def _load(self) -> None:
        assert self._scheduler is not None
        now = self.now()
        await self._recover_unpublished(now)
        query = (
            sa_select(_schedules.c.id, _schedules.c.next_run_at)
            .where(_schedules.c.status == "active")
            .order_by(_schedules.c.id)
        )
        async with self._store.engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        late = []
        for schedule_id, next_run_at in rows:
            if next_run_at is not None and next_run_at > now.timestamp():
                self._arm(schedule_id, next_run_at)
            else:
                late.append(schedule_id)
        self._scheduler.start()
        for schedule_id in late:
            async with self._store.read() as s:
                row = await s.get(ScheduleRow, schedule_id)
            if row is not None and row.status == "active":
                await self._catch_up(row, now)
        log.info(
            "scheduler started schedules=%d late=%d timezone=%s",
            len(rows),
            len(late),
            self.default_timezone,
        )

    async def stop(self) -> None:
        """Stop the timer; firings already running finish on their own."""
        scheduler, self._scheduler = self._scheduler, None
        if scheduler is None:
            return
        _RUNNING.pop(self.name, None)
        scheduler.shutdown(wait=False)
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await asyncio.sleep(0)  # AsyncIOScheduler shuts down on the next loop iteration
        log.info("scheduler stopped")

    def add_interval_job(
        self, name: str, func: Callable[[], Awaitable[object]], *, seconds: float
    ) -> None:
        """Run an internal coroutine function every ``seconds`` (e.g. the heartbeat)."""
        if self._scheduler is None:
            raise RuntimeError("start the ScheduleService first")
        self._scheduler.add_job(
            func,
            IntervalTrigger(seconds=seconds, timezone=UTC),
            id=f"internal:{name}",
            name=name,
            replace_existing=True,
        )

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
            spec: from :func:`core.schedule_spec.parse_command` or ``validate_spec``.
            message_id: the inbound message that asked (for the event log); defaults to
                ``origin``'s id when it is a message.

        Returns:
            The new schedule (its ``id`` is shown to users as ``#id``).
        """
        target = (
            ScheduleTarget(origin.session_key, origin.delivery)
            if isinstance(origin, InboundMessage)
            else origin
        )
        now = self.now()
        anchor = _creation_anchor(spec, now)
        first = next_run_after(spec, now, anchor=anchor) if spec.kind == "cron" else spec.run_at
        values: dict[str, Any] = {
            "session_key": target.session_key,
            "channel": target.delivery.channel,
            "delivery": target.delivery.model_dump_json(),
            "kind": spec.kind,
            "spec": spec.spec,
            "timezone": spec.timezone,
            "prompt": spec.prompt,
            "created_at": now.timestamp(),
            "anchor": anchor.timestamp(),
            "next_run_at": None if first is None else first.timestamp(),
            "last_run_at": None,
            "run_count": 0,
            "status": "active" if first is not None else "done",
            "last_firing_id": None,
            "running_message_id": None,
        }
        if message_id is None and isinstance(origin, InboundMessage):
            message_id = origin.id

        def job(conn: Connection) -> ScheduleInfo:
            earlier = _created_by(conn, target.session_key, message_id, spec)
            if earlier is not None:  # the same request, redelivered after a crash
                return earlier
            inserted = conn.execute(insert(_schedules).values(**values)).inserted_primary_key
            if inserted is None:
                raise RuntimeError("the database returned no id for the new schedule")
            info = info_of_row({**values, "id": int(inserted[0])})
            event = Event(
                target.session_key, EventType.SCHEDULE_CREATED, message_id, event_data(info)
            )
            EventLog.add_in(conn, [event])
            return info

        info = await self._store.transact(job)
        if info.next_run_at is not None:
            self._arm(info.id, info.next_run_at)
        log.info("schedule created id=%d session=%s %s", info.id, info.session_key, info.describe())
        return info

    async def target_for(self, session_key: str) -> ScheduleTarget:
        """A target for a session named from outside (see :func:`target_for_session`)."""
        return await target_for_session(self._store, session_key)

    async def get(self, schedule_id: int) -> ScheduleInfo | None:
        """One schedule in any status, or None."""
        async with self._store.read() as s:
            row = await s.get(ScheduleRow, schedule_id)
        return None if row is None else info_of_row(row.model_dump())

    async def list(self, session_key: str | None = None) -> list[ScheduleInfo]:
        """Active schedules, oldest first; only ``session_key``'s when given."""
        query = sa_select(_schedules).where(_schedules.c.status == "active")
        if session_key is not None:
            query = query.where(_schedules.c.session_key == session_key)
        async with self._store.engine.connect() as conn:
            rows = (await conn.execute(query.order_by(_schedules.c.id))).mappings().all()
        return [info_of_row(r) for r in rows]

    async def cancel(
        self, schedule_id: int, session_key: str | None = None, *, message_id: str | None = None
    ) -> ScheduleInfo | None:
        """Cancel an active schedule (only if it belongs to ``session_key``, when given).

        Returns:
            The cancelled schedule, or None when there is no such active schedule.
        """
        conditions = [_schedules.c.id == schedule_id, _schedules.c.status == "active"]
        if session_key is not None:
            conditions.append(_schedules.c.session_key == session_key)

        def job(conn: Connection) -> ScheduleInfo | None:
            found = (
                conn.execute(
                    update(_schedules)
                    .where(*conditions)
                    .values(status="cancelled")
                    .returning(*_schedules.c)
                )
                .mappings()
                .first()
            )
            if found is None:
                return None
            info = info_of_row(found)
            event = Event(
                info.session_key, EventType.SCHEDULE_CANCELLED, message_id, event_data(info)
            )
            EventLog.add_in(conn, [event])
            return info

        info = await self._store.transact(job)
        if info is None:
            return None
        self._disarm(schedule_id)
        log.info("schedule cancelled id=%d session=%s", schedule_id, info.session_key)
        return info

    # -- firing --------------------------------------------------------------------------

    async def fire(self, schedule_id: int) -> str | None:
        """Fire a due schedule: record the next run, then publish its prompt.

        What APScheduler calls (through :func:`fire_schedule`); tests call it directly with
        an injected clock. Not-yet-due, finished and cancelled schedules are left alone, and
        a firing whose previous message is still queued or running is skipped.

        Returns:
            The id of the published inbound message, or None when nothing was published.
        """
        now = self.now()
        async with self._store.read() as s:
            row = await s.get(ScheduleRow, schedule_id)
        if row is None or row.status != "active" or row.next_run_at is None:
            self._disarm(schedule_id)
            return None
        if row.next_run_at > now.timestamp() + 1.0:
            self._arm(schedule_id, row.next_run_at)  # the row is the truth, not the job
            return None
        previous = await self._message_status(row.running_message_id)
        if previous in ("pending", "claimed"):
            await self._skip(row, now, reason="previous firing still queued or running")
            return None
        return await self._fire_row(row, now, late_by=now.timestamp() - row.next_run_at)

    async def _fire_row(self, row: ScheduleRow, now: datetime, *, late_by: float) -> str | None:
        schedule_id, due = _id(row), row.next_run_at
        assert due is not None
        spec = spec_of_row(row.model_dump())
        due_at = datetime.fromtimestamp(due, UTC)
        missed = _count_missed(spec, due_at, now, anchor=from_timestamp(row.anchor))
        nxt = next_run_after(spec, max(now, due_at), anchor=from_timestamp(row.anchor))
        firing_id = firing_id_for(schedule_id, due_at)
        message_id = firing_message_id(firing_id)
        data: dict[str, Any] = {
            "schedule_id": schedule_id,
            "firing_id": firing_id,
            "due": due_at.isoformat(),
            "next_run": None if nxt is None else nxt.isoformat(),
        }
        if late_by > 1.0:
            data["late_s"] = round(late_by, 3)
        if missed > 1:
            data["coalesced_runs"] = missed
        values = {
            "next_run_at": None if nxt is None else nxt.timestamp(),
            "last_run_at": now.timestamp(),
            "run_count": _schedules.c.run_count + 1,
            "last_firing_id": firing_id,
            "running_message_id": message_id,
            "status": "active" if nxt is not None else "done",
        }
        event = Event(row.session_key, EventType.SCHEDULE_FIRED, message_id, data)
        recorded = await self._store.transact(
            lambda conn: _advance(conn, schedule_id, due, values, event)
        )
        if not recorded:
            log.info("schedule changed meanwhile; not firing id=%d", schedule_id)
            return None
        if nxt is not None:
            self._arm(schedule_id, nxt.timestamp())
        published = await self._publish(row, firing_id, message_id)
        log.info(
            "schedule fired id=%d session=%s message_id=%s next_run=%s duplicate=%s",
            schedule_id,
            row.session_key,
            published,
            data["next_run"],
            published != message_id,
        )
        return message_id

    async def _publish(self, row: ScheduleRow, firing_id: str, message_id: str) -> str:
        message = InboundMessage(
            id=message_id,
            session_key=row.session_key,
            text=row.prompt,
            delivery=Delivery.model_validate_json(row.delivery),
            sender=f"schedule #{row.id}",
            origin="schedule",
            event_id=firing_id,
            schedule_id=row.id,
        )
        result = await self._bus.publish_inbound(message)
        return result.message_id

    async def _skip(self, row: ScheduleRow, now: datetime, *, reason: str) -> None:
        """Advance past a run that will not fire, and say so in the event log."""
        schedule_id, due = _id(row), row.next_run_at
        assert due is not None
        spec = spec_of_row(row.model_dump())
        due_at = datetime.fromtimestamp(due, UTC)
        nxt = next_run_after(spec, max(now, due_at), anchor=from_timestamp(row.anchor))
        data: dict[str, Any] = {
            "schedule_id": schedule_id,
            "due": due_at.isoformat(),
            "reason": reason,
            "skipped_runs": _count_missed(spec, due_at, now, anchor=from_timestamp(row.anchor)),
            "next_run": None if nxt is None else nxt.isoformat(),
        }
        values = {
            "next_run_at": None if nxt is None else nxt.timestamp(),
            "status": "active" if nxt is not None else "done",
        }
        event = Event(row.session_key, EventType.SCHEDULE_MISSED, row.running_message_id, data)
        if not await self._store.transact(
            lambda conn: _advance(conn, schedule_id, due, values, event)
        ):
            return
        log.warning(
            "schedule run skipped id=%d due=%s reason=%s next_run=%s",
            schedule_id,
            data["due"],
            reason,
            data["next_run"],
        )
        if nxt is not None:
            self._arm(schedule_id, nxt.timestamp())

    async def _catch_up(self, row: ScheduleRow, now: datetime) -> None:
        """A run that came due while the service was down: fire once within grace, else skip."""
        due = row.next_run_at
        if due is None:  # an active row without a next run cannot fire again
            await self._finish(row)
            return
        late_by = now.timestamp() - due
        if late_by > self.config.misfire_grace:
            grace = format_duration(int(self.config.misfire_grace))
            await self._skip(row, now, reason=f"missed by {late_by:.0f}s (grace {grace})")
            return
        if await self._message_status(row.running_message_id) in ("pending", "claimed"):
            await self._skip(row, now, reason="previous firing still queued or running")
            return
        await self._fire_row(row, now, late_by=late_by)

    async def _finish(self, row: ScheduleRow) -> None:
        await self._store.transact(
            lambda conn: conn.execute(
                update(_schedules)
                .where(_schedules.c.id == row.id, _schedules.c.status == "active")
                .values(status="done")
            )
        )

    async def _recover_unpublished(self, now: datetime) -> None:
        """Publish recent firings that were recorded but not published (a crash in between)."""
        since = now.timestamp() - self.config.misfire_grace
        async with self._store.read() as s:
            rows = (
                await s.exec(
                    select(ScheduleRow).where(
                        col(ScheduleRow.last_run_at) >= since,
                        col(ScheduleRow.running_message_id).is_not(None),
                        or_(col(ScheduleRow.status) == "active", col(ScheduleRow.status) == "done"),
                    )
                )
            ).all()
        known = await self._existing_messages([r.running_message_id or "" for r in rows])
        for row in rows:
            if row.running_message_id in known or row.last_firing_id is None:
                continue
            log.warning("publishing a firing lost in a crash id=%d", _id(row))
            await self._publish(row, row.last_firing_id, row.running_message_id or "")

    async def _existing_messages(self, ids: Sequence[str]) -> set[str]:
        found: set[str] = set()
        for start in range(0, len(ids), _IN_CHUNK):
            chunk = list(ids[start : start + _IN_CHUNK])
            async with self._store.read() as s:
                rows = (
                    await s.exec(select(InboundRow.id).where(col(InboundRow.id).in_(chunk)))
                ).all()
            found.update(rows)
        return found

    async def _message_status(self, message_id: str | None) -> str | None:
        if message_id is None:
            return None
        async with self._store.read() as s:
            return (
                await s.exec(select(InboundRow.status).where(col(InboundRow.id) == message_id))
            ).first()

    # -- APScheduler plumbing ------------------------------------------------------------

    def _arm(self, schedule_id: int, when: float) -> None:
        if self._scheduler is None:
            return
        self._scheduler.add_job(
            fire_schedule,
            DateTrigger(run_date=datetime.fromtimestamp(when, UTC), timezone=UTC),
            args=[schedule_id, self.name],
            id=_job_id(schedule_id),
            name=f"schedule #{schedule_id}",
            replace_existing=True,
        )

    def _disarm(self, schedule_id: int) -> None:
        if self._scheduler is None:
            return
        with contextlib.suppress(JobLookupError):
            self._scheduler.remove_job(_job_id(schedule_id))

    def _on_job_event(self, event: JobEvent) -> None:
        schedule_id = _schedule_id_of(event.job_id)
        if event.code == EVENT_JOB_ERROR and isinstance(event, JobExecutionEvent):
            log.error("scheduled job failed job=%s", event.job_id, exc_info=event.exception)
            problem: Literal["error", "missed", "busy"] = "error"
            detail = repr(event.exception)
        elif event.code == EVENT_JOB_MISSED:
            log.warning("scheduled job missed its run time job=%s", event.job_id)
            problem, detail = "missed", "run time missed (event loop stalled)"
        else:
            log.warning("scheduled job still running, run skipped job=%s", event.job_id)
            problem, detail = "busy", "previous run still running"
        if schedule_id is None or self._scheduler is None:
            return
        task = asyncio.get_running_loop().create_task(
            self._recover(schedule_id, problem, detail), name=f"schedule-recover-{schedule_id}"
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _recover(
        self, schedule_id: int, problem: Literal["error", "missed", "busy"], detail: str
    ) -> None:
        """After a failed, missed or skipped job run, put the schedule back on its timer."""
        try:
            async with self._store.read() as s:
                row = await s.get(ScheduleRow, schedule_id)
            if row is None or row.status != "active" or row.next_run_at is None:
                return
            if problem == "error":
                data = {"schedule_id": schedule_id, "error": detail}
                await self._events.append(Event(row.session_key, EventType.ERROR, None, data))
                # Try again later, not at once: the store may be what failed.
                retry = self.now().timestamp() + _RETRY_AFTER_ERROR
                self._arm(schedule_id, max(row.next_run_at, retry))
                return
            now = self.now()
            if row.next_run_at > now.timestamp():
                self._arm(schedule_id, row.next_run_at)
            else:
                await self._catch_up(row, now)
        except Exception:
            log.exception("could not re-arm schedule id=%d; retrying later", schedule_id)
            self._arm(schedule_id, self.now().timestamp() + _RETRY_AFTER_ERROR)


def _advance(
    conn: Connection, schedule_id: int, due: float, values: dict[str, Any], event: Event
) -> bool:
    """Move a schedule on from the run due at ``due``, unless someone else already did."""
    res = conn.execute(
        update(_schedules)
        .where(
            _schedules.c.id == schedule_id,
            _schedules.c.status == "active",
            _schedules.c.next_run_at == due,
        )
        .values(**values)
    )
    if res.rowcount != 1:
        return False
    EventLog.add_in(conn, [event])
    return True


def _host_zone() -> str:
    try:
        name = tzlocal.get_localzone_name()
    except Exception:  # no zone configured on the host: UTC is the honest default
        return "UTC"
    return name or "UTC"


def _job_id(schedule_id: int) -> str:
    return f"schedule:{schedule_id}"


def _schedule_id_of(job_id: str) -> int | None:
    prefix, _, number = job_id.partition(":")
    return int(number) if prefix == "schedule" and number.isdigit() else None


def _id(row: ScheduleRow) -> int:
    if row.id is None:
        raise ValueError("schedule row without id")
    return row.id


def _creation_anchor(spec: ScheduleSpec, now: datetime) -> datetime:
    if spec.kind in ("every", "after") and spec.run_at is not None and spec.interval_seconds:
        return spec.run_at - timedelta(seconds=spec.interval_seconds)
    return now


def _created_by(
    conn: Connection, session_key: str, message_id: str | None, spec: ScheduleSpec
) -> ScheduleInfo | None:
    """The schedule ``message_id`` already created with this very spec, if any."""
    if message_id is None:
        return None
    events = EventRow.__table__  # type: ignore[attr-defined]
    rows = conn.execute(
        sa_select(events.c.data).where(
            events.c.session_key == session_key,
            events.c.message_id == message_id,
            events.c.type == EventType.SCHEDULE_CREATED,
        )
    ).all()
    for (data,) in rows:
        made = json.loads(data)
        if (made.get("kind"), made.get("spec"), made.get("prompt")) == (
            spec.kind,
            spec.spec,
            spec.prompt,
        ):
            row = conn.execute(
                sa_select(_schedules).where(_schedules.c.id == made["schedule_id"])
            ).first()
            return None if row is None else info_of_row(row._mapping)
    return None


def _count_missed(
    spec: ScheduleSpec, due: datetime, now: datetime, *, anchor: datetime | None
) -> int:
    """How many runs fell between ``due`` (inclusive) and ``now`` (at least 1, capped)."""
    if spec.kind == "every" and spec.interval_seconds:
        return max(1, int((now - due).total_seconds() // spec.interval_seconds) + 1)
    count, moment = 1, due
    while count < 1000:
        following = next_run_after(spec, moment, anchor=anchor)
        if following is None or following > now:
            break
        count, moment = count + 1, following
    return count
