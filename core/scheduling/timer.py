"""The timer: APScheduler 3 keeps time in memory; the schedule rows stay the truth."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Coroutine
from datetime import UTC, datetime
from typing import Any, Literal

from apscheduler.events import (
    EVENT_JOB_ERROR,
    EVENT_JOB_MAX_INSTANCES,
    EVENT_JOB_MISSED,
    JobEvent,
    JobExecutionEvent,
)
from apscheduler.job import Job
from apscheduler.jobstores.base import JobLookupError
from apscheduler.jobstores.memory import MemoryJobStore
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.date import DateTrigger
from apscheduler.triggers.interval import IntervalTrigger

__all__ = ["Fire", "OnProblem", "Problem", "Timer"]

log = logging.getLogger(__name__)

Problem = Literal["error", "missed", "busy"]
Fire = Callable[[int], Awaitable[object]]
"""Called with a schedule id when its alarm goes off."""
OnProblem = Callable[[int, Problem, str], Coroutine[Any, Any, None]]
"""Called with a schedule id after its alarm raised, was missed, or overlapped a run."""


class Timer:
    """One in-memory date job per armed schedule, plus internal interval jobs.

    The in-memory job store never pickles, so a job holds ``fire`` itself (usually a
    bound method of the service) and no registry is needed to find it again. Arming
    before :meth:`start` queues the job; the clock starts ticking at :meth:`start`.

    Args:
        fire: what an alarm calls, with the schedule id.
        on_problem: what a failed, missed or overlapping alarm calls (in a task).
        misfire_grace: seconds an alarm may be late and still go off.
    """

    def __init__(self, *, fire: Fire, on_problem: OnProblem, misfire_grace: float) -> None:
        self._fire = fire
        self._on_problem = on_problem
        self._tasks: set[asyncio.Task[None]] = set()
        self._scheduler = AsyncIOScheduler(
            jobstores={"default": MemoryJobStore()},
            job_defaults={
                "coalesce": True,
                "max_instances": 1,
                "misfire_grace_time": max(1, int(misfire_grace)),
            },
            timezone=UTC,
        )
        self._scheduler.add_listener(
            self._on_job_event, EVENT_JOB_ERROR | EVENT_JOB_MISSED | EVENT_JOB_MAX_INSTANCES
        )
        self._stopped = False

    def start(self) -> None:
        self._scheduler.start()

    async def stop(self) -> None:
        """Stop ticking; alarms already going off finish on their own."""
        if self._stopped:
            return
        self._stopped = True
        if self._scheduler.running:
            self._scheduler.shutdown(wait=False)
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await asyncio.sleep(0)  # AsyncIOScheduler shuts down on the next loop iteration

    def arm(self, schedule_id: int, when: float) -> None:
        """Set (or move) the alarm of ``schedule_id`` to the timestamp ``when``."""
        if self._stopped:
            return
        self._scheduler.add_job(
            self._fire,
            DateTrigger(run_date=datetime.fromtimestamp(when, UTC), timezone=UTC),
            args=[schedule_id],
            id=_job_id(schedule_id),
            name=f"schedule #{schedule_id}",
            replace_existing=True,
        )

    def disarm(self, schedule_id: int) -> None:
        if self._stopped:
            return
        with contextlib.suppress(JobLookupError):
            self._scheduler.remove_job(_job_id(schedule_id))

    def job(self, schedule_id: int) -> Job | None:
        """The armed job of ``schedule_id``, if any (for inspection)."""
        return self._scheduler.get_job(_job_id(schedule_id))

    def armed(self) -> set[int]:
        """The schedule ids that have an alarm."""
        ids = (_schedule_id_of(job.id) for job in self._scheduler.get_jobs())
        return {i for i in ids if i is not None}

    def add_interval_job(
        self, name: str, func: Callable[[], Awaitable[object]], *, seconds: float
    ) -> None:
        """Run an internal coroutine function every ``seconds``."""
        self._scheduler.add_job(
            func,
            IntervalTrigger(seconds=seconds, timezone=UTC),
            id=f"internal:{name}",
            name=name,
            replace_existing=True,
        )

    def _on_job_event(self, event: JobEvent) -> None:
        problem: Problem
        if event.code == EVENT_JOB_ERROR and isinstance(event, JobExecutionEvent):
            log.error("scheduled job failed job=%s", event.job_id, exc_info=event.exception)
            problem, detail = "error", repr(event.exception)
        elif event.code == EVENT_JOB_MISSED:
            log.warning("scheduled job missed its run time job=%s", event.job_id)
            problem, detail = "missed", "run time missed (event loop stalled)"
        else:
            log.warning("scheduled job still running, run skipped job=%s", event.job_id)
            problem, detail = "busy", "previous run still running"
        schedule_id = _schedule_id_of(event.job_id)
        if schedule_id is None or self._stopped:
            return
        task = asyncio.get_running_loop().create_task(
            self._on_problem(schedule_id, problem, detail), name=f"schedule-recover-{schedule_id}"
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


def _job_id(schedule_id: int) -> str:
    return f"schedule:{schedule_id}"


def _schedule_id_of(job_id: str) -> int | None:
    prefix, _, number = job_id.partition(":")
    return int(number) if prefix == "schedule" and number.isdigit() else None
