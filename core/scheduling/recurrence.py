"""When a schedule runs: APScheduler 3 triggers, the next run, and runs missed meanwhile."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.date import DateTrigger
from apscheduler.triggers.interval import IntervalTrigger

from core.scheduling.records import ScheduleSpec

__all__ = [
    "aps_crontab",
    "build_trigger",
    "check_cron",
    "count_missed",
    "creation_anchor",
    "cron_field_count_error",
    "next_run_after",
]

_CRON_FIELDS = (
    ("minute", "minute (0-59)"),
    ("hour", "hour (0-23)"),
    ("day", "day-of-month (1-31)"),
    ("month", "month (1-12 or jan-dec)"),
    ("day_of_week", "day-of-week (0-7 or sun-sat)"),
)
_WEEKDAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
_NUMERIC_DOW_RE = re.compile(r"(\*|(\d{1,2})(?:-(\d{1,2}))?)(?:/(\d{1,2}))?")
_MAX_COUNTED = 1000


def build_trigger(spec: ScheduleSpec, *, anchor: datetime | None = None) -> Any:
    """Turn a schedule into an APScheduler 3 trigger.

    Args:
        spec: a validated schedule.
        anchor: for every, the creation time; runs fall on anchor + k * interval (k >= 1),
            so re-registering after a restart keeps the original rhythm. Defaults to
            ``spec.run_at - interval``.

    Returns:
        An ``IntervalTrigger``, ``DateTrigger`` or ``CronTrigger``.
    """
    zone = ZoneInfo(spec.timezone)
    if spec.kind == "every":
        interval = _interval_of(spec)
        return IntervalTrigger(
            seconds=interval.total_seconds(),
            start_date=_anchor_of(spec, anchor) + interval,
            timezone=zone,
        )
    if spec.kind == "cron":
        return CronTrigger.from_crontab(aps_crontab(spec.spec), timezone=zone)
    return DateTrigger(run_date=_run_at_of(spec), timezone=zone)


def next_run_after(
    spec: ScheduleSpec, after: datetime, *, anchor: datetime | None = None
) -> datetime | None:
    """The next fire time strictly after ``after``, or None when there is none.

    Cron times come from APScheduler, so they match what the scheduler will do. Across
    DST changes a cron keeps its local wall-clock time (``0 9 * * *`` in Europe/Berlin is
    09:00 CET before and 09:00 CEST after). Local times the change skips or repeats follow
    APScheduler 3.11: on spring-forward day ``30 2 * * *`` in Europe/Berlin fires once, at
    01:30 UTC (03:30 CEST, an hour "late"); on fall-back day it fires twice, at 02:30 CEST
    and again at 02:30 CET.

    Args:
        spec: a validated schedule.
        after: aware datetime.
        anchor: for every, the creation time (see :func:`build_trigger`).

    Returns:
        Aware UTC datetime, or None (a one-shot that has run, or a cron that never fires again).
    """
    if spec.kind == "every":
        interval = _interval_of(spec)
        start = _anchor_of(spec, anchor)
        steps = max((after - start) // interval, 0) + 1
        return (start + steps * interval).astimezone(UTC)
    if spec.kind == "cron":
        trigger = build_trigger(spec)
        # Called as the scheduler does after a run at ``after``, so only later times come back.
        # ``after`` must be local: APScheduler loses the second 02:30 of a fall-back night
        # when handed the same instant in UTC.
        moment = after.astimezone(trigger.timezone)
        fire: datetime | None = trigger.get_next_fire_time(moment, moment)
        return None if fire is None else fire.astimezone(UTC)
    run_at = _run_at_of(spec)
    return run_at if run_at > after else None


def count_missed(
    spec: ScheduleSpec, due: datetime, now: datetime, *, anchor: datetime | None = None
) -> int:
    """How many runs fell between ``due`` (inclusive) and ``now`` (at least 1, capped)."""
    if spec.kind == "every" and spec.interval_seconds:
        return max(1, int((now - due).total_seconds() // spec.interval_seconds) + 1)
    count, moment = 1, due
    while count < _MAX_COUNTED:
        following = next_run_after(spec, moment, anchor=anchor)
        if following is None or following > now:
            break
        count, moment = count + 1, following
    return count


def creation_anchor(spec: ScheduleSpec, now: datetime) -> datetime:
    """What a new schedule's runs count from: one interval before the first for every/after."""
    if spec.kind in ("every", "after") and spec.run_at is not None and spec.interval_seconds:
        return spec.run_at - timedelta(seconds=spec.interval_seconds)
    return now


def aps_crontab(expr: str) -> str:
    """Rewrite numeric weekdays to names: APScheduler 3 reads 0 as Monday, crontab as Sunday.

    Raises:
        ValueError: a numeric day-of-week term is out of range (the message is fit to show).
    """
    fields = expr.split()
    if len(fields) == 5:
        fields[4] = ",".join(_dow_term(term) for term in fields[4].split(","))
    return " ".join(fields)


def check_cron(expr: str, *, zone: ZoneInfo, now: datetime) -> str:
    """Check a 5-field cron expression field by field; return it with single spaces.

    Raises:
        ValueError: naming the bad field and why (the message is fit to show users).
    """
    fields = expr.split()
    if len(fields) != 5:
        raise ValueError(cron_field_count_error(expr, len(fields)))
    canonical = " ".join(fields)
    translated = aps_crontab(canonical).split()
    for (name, label), value, aps_value in zip(_CRON_FIELDS, fields, translated, strict=True):
        try:
            CronTrigger(timezone=zone, **{name: aps_value})
        except ValueError as exc:
            reason = str(exc).removeprefix(f"Error validating expression '{aps_value}': ")
            raise ValueError(
                f'bad cron expression "{canonical}": the {label} field "{value}" is invalid'
                f" ({reason})"
            ) from None
    trigger = CronTrigger.from_crontab(" ".join(translated), timezone=zone)
    if trigger.get_next_fire_time(None, now.astimezone(UTC)) is None:
        raise ValueError(f'the cron expression "{canonical}" never fires (no such date)')
    return canonical


def cron_field_count_error(expr: str, count: int) -> str:
    return (
        f'a cron expression has 5 fields (minute hour day-of-month month day-of-week), "{expr}"'
        f' has {count} — e.g. "0 9 * * mon-fri"'
    )


def _dow_term(term: str) -> str:
    match = _NUMERIC_DOW_RE.fullmatch(term)
    if match is None:
        return term  # names (mon-fri) mean the same to APScheduler as to cron
    star, first, last, step = match.groups()
    if star == "*":
        if step is None:
            return term
        low, high = 0, 6
    else:
        low = int(first)
        # "5/2" runs to the end of the week, as in cronie.
        high = int(last) if last is not None else (6 if step else low)
    if high > 7 or low > high or step in ("0", "00"):
        raise ValueError(
            f'the day-of-week "{term}" is not valid — use 0-7 (0 and 7 are Sunday) or sun-sat'
        )
    days = range(low, high + 1, int(step) if step else 1)
    return ",".join(dict.fromkeys(_WEEKDAYS[day % 7] for day in days))


def _interval_of(spec: ScheduleSpec) -> timedelta:
    if spec.interval_seconds is None:
        raise ValueError(f"{spec.kind} schedule without interval_seconds")
    return timedelta(seconds=spec.interval_seconds)


def _run_at_of(spec: ScheduleSpec) -> datetime:
    if spec.run_at is None:
        raise ValueError(f"{spec.kind} schedule without run_at")
    return spec.run_at


def _anchor_of(spec: ScheduleSpec, anchor: datetime | None) -> datetime:
    if anchor is not None:
        return anchor.astimezone(UTC)
    return _run_at_of(spec) - _interval_of(spec)
