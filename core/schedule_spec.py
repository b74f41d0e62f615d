"""Parse, validate and time schedules (/every, /after, /at, /cron and the manage_schedule tool)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, cast, get_args
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.date import DateTrigger
from apscheduler.triggers.interval import IntervalTrigger
from pydantic import BaseModel, ConfigDict, Field, field_validator

from core.errors import CommandError

__all__ = [
    "MAX_INTERVAL",
    "MIN_INTERVAL",
    "ScheduleKind",
    "ScheduleSpec",
    "build_trigger",
    "describe",
    "format_duration",
    "next_run_after",
    "parse_command",
    "parse_duration",
    "validate_spec",
]

ScheduleKind = Literal["every", "after", "at", "cron"]

MIN_INTERVAL = 10
"""Shortest accepted /every interval or /after delay, in seconds (inclusive)."""
MAX_INTERVAL = 86_400
"""Longest accepted /every interval or /after delay, in seconds (inclusive)."""

_KINDS: tuple[str, ...] = get_args(ScheduleKind)
_UNITS = (("d", 86_400), ("h", 3_600), ("m", 60), ("s", 1))
# Nine digits is far beyond MAX_INTERVAL and keeps int() away from huge inputs.
_DURATION_RE = re.compile(r"(?:(\d{1,9})d)?(?:(\d{1,9})h)?(?:(\d{1,9})m)?(?:(\d{1,9})s)?", re.I)
_DATE_RE = re.compile(r"\d{4}-\d{2}-\d{2}")
_TIME_RE = re.compile(r"\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?", re.I)
_TZ_RE = re.compile(r"[A-Za-z0-9_+\-/]{1,64}")
_TZ_ARG_RE = re.compile(r"tz=(\S*)\s*(.*)", re.I | re.S)
_QUOTES = '"“”'  # chat clients turn " into curly quotes
_EXAMPLES: dict[str, str] = {
    "every": "/every 5m check the build",
    "after": "/after 20m remind me to stretch",
    "at": "/at 2026-11-23T09:00 summarize my inbox",
    "cron": '/cron "0 9 * * mon-fri" post the standup reminder',
}
_USAGE: dict[str, str] = {
    "every": f"/every <interval> <prompt> — e.g. {_EXAMPLES['every']}",
    "after": f"/after <delay> <prompt> — e.g. {_EXAMPLES['after']}",
    "at": f"/at <date>T<time> [tz=Area/City] <prompt> — e.g. {_EXAMPLES['at']}",
    "cron": '/cron "<minute hour day-of-month month day-of-week>" [tz=Area/City] <prompt>'
    f" — e.g. {_EXAMPLES['cron']}",
}
_CRON_FIELDS = (
    ("minute", "minute (0-59)"),
    ("hour", "hour (0-23)"),
    ("day", "day-of-month (1-31)"),
    ("month", "month (1-12 or jan-dec)"),
    ("day_of_week", "day-of-week (0-7 or sun-sat)"),
)
_WEEKDAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
_NUMERIC_DOW_RE = re.compile(r"(\*|(\d{1,2})(?:-(\d{1,2}))?)(?:/(\d{1,2}))?")


class ScheduleSpec(BaseModel):
    """A validated schedule, ready to be stored and turned into a trigger.

    Attributes:
        kind: every, after, at or cron.
        spec: canonical text: the interval for every/after (``1h30m``), the UTC ISO datetime
            for at, the 5-field expression for cron.
        timezone: IANA name the schedule is shown in; cron fields are read in it.
        interval_seconds: the interval (every) or delay (after); None otherwise.
        run_at: aware UTC; the one run for after/at, the first run for every (creation time
            plus one interval, which anchors the series); None for cron.
        prompt: the plain message enqueued on every firing.
    """

    model_config = ConfigDict(frozen=True)

    kind: ScheduleKind
    spec: str
    timezone: str
    interval_seconds: int | None = None
    run_at: datetime | None = None
    prompt: str = Field(min_length=1)

    @field_validator("run_at")
    @classmethod
    def _utc(cls, value: datetime | None) -> datetime | None:
        # Naive values are taken as UTC: SQLite hands back stored datetimes without tzinfo.
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def parse_duration(text: str) -> int:
    """Read an interval like ``30s``, ``5m``, ``2h``, ``1h30m``, ``1d`` or ``1d2h``.

    Units d, h, m and s may each appear once, largest first; case is ignored. Bare
    numbers are refused because ``5`` could mean seconds or minutes.

    Args:
        text: the interval as typed.

    Returns:
        The interval in seconds (bounds are checked by the callers, not here).

    Raises:
        CommandError: the text is not an interval.
    """
    cleaned = text.strip()
    match = _DURATION_RE.fullmatch(cleaned)
    if not cleaned or match is None:
        hint = f" (add a unit, e.g. {cleaned}m)" if cleaned.isdigit() else ""
        raise CommandError(f"can't read the interval '{cleaned}'{hint} — try 30s, 5m, 2h or 1d")
    return sum(
        int(value) * size for value, (_, size) in zip(match.groups(), _UNITS, strict=True) if value
    )


def format_duration(seconds: int) -> str:
    """Render seconds canonically, largest units first: 5400 -> ``1h30m``, 0 -> ``0s``.

    Args:
        seconds: a non-negative number of seconds.

    Returns:
        The text :func:`parse_duration` reads back to the same number.

    Raises:
        ValueError: ``seconds`` is negative.
    """
    if seconds < 0:
        raise ValueError(f"negative duration: {seconds}")
    parts = []
    for unit, size in _UNITS:
        count, seconds = divmod(seconds, size)
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts) or "0s"


def parse_command(command: str, args: str, *, now: datetime, default_tz: str) -> ScheduleSpec:
    """Parse a scheduling slash command.

    Grammar: ``/every <interval> <prompt>``, ``/after <delay> <prompt>``,
    ``/at <ISO-8601 datetime> [tz=Area/City] <prompt>`` (a naive datetime is local to the
    tz, default ``default_tz``; ``2026-11-23 09:00`` with a space works too) and
    ``/cron "<m h dom mon dow>" [tz=Area/City] <prompt>`` (the quotes may be left out; then
    the first five words are the expression).

    Args:
        command: ``every``, ``after``, ``at`` or ``cron`` (a leading ``/`` is ignored).
        args: the text after the command word.
        now: the current time (aware); /at must be later, /every and /after count from it.
        default_tz: IANA timezone used when the command names none.

    Returns:
        The validated schedule.

    Raises:
        CommandError: with a specific, user-facing message.
    """
    kind = _kind(command.strip().lstrip("/"))
    text = args.strip()
    if not text:
        raise CommandError(f"usage: {_USAGE[kind]}")
    tz: str | None = None
    if kind == "cron":
        spec, rest = _split_cron(text)
        tz, rest = _split_tz(rest)
    elif kind == "at":
        spec, rest = _split_datetime(text)
        tz, rest = _split_tz(rest)
    else:
        spec, rest = _split_word(text)
    return _build(kind, spec, rest.strip(), tz=tz, now=now, default_tz=default_tz)


def validate_spec(
    kind: str,
    spec: str,
    prompt: str,
    *,
    tz: str | None,
    now: datetime,
    default_tz: str,
) -> ScheduleSpec:
    """Validate the manage_schedule tool's structured arguments with the slash-command rules.

    Args:
        kind: ``every``, ``after``, ``at`` or ``cron``.
        spec: the interval, ISO datetime or 5-field cron expression (quotes optional).
        prompt: the message to schedule.
        tz: IANA timezone, or None for ``default_tz``.
        now: the current time (aware).
        default_tz: IANA timezone used when ``tz`` is None.

    Returns:
        The validated schedule.

    Raises:
        CommandError: with the same messages as :func:`parse_command`.
    """
    checked = _kind(kind.strip())
    text = spec.strip().strip(_QUOTES).strip() if checked == "cron" else spec.strip()
    if not text:
        raise CommandError(f"usage: {_USAGE[checked]}")
    return _build(checked, text, prompt.strip(), tz=tz, now=now, default_tz=default_tz)


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
        return CronTrigger.from_crontab(_aps_crontab(spec.spec), timezone=zone)
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


def describe(spec: ScheduleSpec, next_run: datetime | None) -> str:
    """One line for replies, e.g. ``every 5m — next run 2026-11-22 10:05 UTC — "check the build"``.

    Args:
        spec: the schedule.
        next_run: its next fire time (aware), or None when it will not run again.

    Returns:
        Kind and interval or expression, the next run in the schedule's timezone, the prompt.
    """
    if spec.kind in ("every", "after"):
        head = f"{spec.kind} {format_duration(spec.interval_seconds or 0)}"
    elif spec.kind == "cron":
        head = f'cron "{spec.spec}"'
    else:
        head = "once"
    when = "no further runs" if next_run is None else f"next run {_local(next_run, spec.timezone)}"
    prompt = " ".join(spec.prompt.split())
    if len(prompt) > 80:
        prompt = prompt[:79] + "…"
    return f'{head} — {when} — "{prompt}"'


def _build(
    kind: ScheduleKind, spec: str, prompt: str, *, tz: str | None, now: datetime, default_tz: str
) -> ScheduleSpec:
    zone_name = _zone_name(tz if tz is not None else default_tz)
    zone = ZoneInfo(zone_name)
    interval: int | None = None
    run_at: datetime | None = None
    if kind in ("every", "after"):
        interval = _bounded(kind, spec)
        spec = format_duration(interval)
        run_at = now.astimezone(UTC) + timedelta(seconds=interval)
        shown = spec
    elif kind == "at":
        run_at = _future_datetime(spec, zone, now)
        spec = run_at.isoformat()
        shown = _local(run_at, zone_name)
    else:
        spec = _valid_cron(spec, zone, now)
        shown = f'"{spec}"'
    _check_prompt(kind, shown, prompt)
    return ScheduleSpec(
        kind=kind,
        spec=spec,
        timezone=zone_name,
        interval_seconds=interval,
        run_at=run_at,
        prompt=prompt,
    )


def _kind(name: str) -> ScheduleKind:
    lowered = name.lower()
    if lowered in _KINDS:
        return cast(ScheduleKind, lowered)
    raise CommandError(f"unknown schedule kind '{name}' — use {', '.join(_KINDS)}")


def _check_prompt(kind: ScheduleKind, shown: str, prompt: str) -> None:
    if not prompt:
        when = f"on {shown}" if kind == "cron" else f"{kind} {shown}"
        raise CommandError(f"what should I do {when}? — e.g. {_EXAMPLES[kind]}")
    if prompt.startswith("/"):
        raise CommandError(
            "only plain messages can be scheduled — slash commands are not supported"
        )


def _bounded(kind: ScheduleKind, text: str) -> int:
    seconds = parse_duration(text)
    noun = "interval" if kind == "every" else "delay"
    if seconds < MIN_INTERVAL:
        raise CommandError(
            f"the {noun} must be at least {format_duration(MIN_INTERVAL)} (got {text.strip()})"
        )
    if seconds > MAX_INTERVAL:
        raise CommandError(
            f"the {noun} must be at most {format_duration(MAX_INTERVAL)} (got {text.strip()})"
            " — for longer horizons use /at or /cron"
        )
    return seconds


def _zone_name(name: str) -> str:
    cleaned = name.strip()
    if _TZ_RE.fullmatch(cleaned):
        try:
            ZoneInfo(cleaned)
        except (ZoneInfoNotFoundError, ValueError, OSError):
            pass
        else:
            return cleaned
    raise CommandError(
        f"unknown timezone '{cleaned}' — use an IANA name"
        " like Europe/Berlin, America/New_York or UTC"
    )


def _split_tz(text: str) -> tuple[str | None, str]:
    match = _TZ_ARG_RE.fullmatch(text.strip())
    if match is None:
        return None, text
    return match.group(1), match.group(2)


def _split_cron(text: str) -> tuple[str, str]:
    if text[0] in _QUOTES:
        end = next((i for i, char in enumerate(text[1:], 1) if char in _QUOTES), -1)
        if end < 0:
            raise CommandError(
                f"the cron expression has no closing quote — usage: {_USAGE['cron']}"
            )
        return text[1:end], text[end + 1 :]
    words = text.split(maxsplit=5)
    if len(words) < 5:
        raise _field_count_error(text, len(words))
    return " ".join(words[:5]), words[5] if len(words) > 5 else ""


def _split_datetime(text: str) -> tuple[str, str]:
    words = text.split(maxsplit=2)
    if len(words) > 1 and _DATE_RE.fullmatch(words[0]) and _TIME_RE.fullmatch(words[1]):
        return f"{words[0]}T{words[1]}", words[2] if len(words) > 2 else ""
    return _split_word(text)


def _split_word(text: str) -> tuple[str, str]:
    words = text.split(maxsplit=1)
    return words[0], words[1] if len(words) > 1 else ""


def _future_datetime(text: str, zone: ZoneInfo, now: datetime) -> datetime:
    example = "e.g. 2026-11-23T09:00 or 2026-11-23T09:00+01:00"
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        raise CommandError(f"can't read the date and time '{text}' — {example}") from None
    if _DATE_RE.fullmatch(text):
        raise CommandError(f"'{text}' has no time of day — {example}")
    if parsed.tzinfo is None:
        local = parsed.replace(tzinfo=zone)
        if local.astimezone(UTC).astimezone(zone).replace(tzinfo=None) != parsed:
            raise CommandError(
                f"{parsed:%Y-%m-%d %H:%M} does not exist in {zone.key} (the clocks skip it)"
            )
        parsed = local
    run_at = parsed.astimezone(UTC)
    if run_at <= now:
        raise CommandError(
            f"{_local(run_at, zone.key)} is in the past (now is {_local(now, zone.key)})"
            " — give a future time"
        )
    return run_at


def _field_count_error(expr: str, count: int) -> CommandError:
    return CommandError(
        f'a cron expression has 5 fields (minute hour day-of-month month day-of-week), "{expr}"'
        f' has {count} — e.g. "0 9 * * mon-fri"'
    )


def _valid_cron(expr: str, zone: ZoneInfo, now: datetime) -> str:
    fields = expr.split()
    if len(fields) != 5:
        raise _field_count_error(expr, len(fields))
    canonical = " ".join(fields)
    translated = _aps_crontab(canonical).split()
    for (name, label), value, aps_value in zip(_CRON_FIELDS, fields, translated, strict=True):
        try:
            CronTrigger(timezone=zone, **{name: aps_value})
        except ValueError as exc:
            reason = str(exc).removeprefix(f"Error validating expression '{aps_value}': ")
            raise CommandError(
                f'bad cron expression "{canonical}": the {label} field "{value}" is invalid'
                f" ({reason})"
            ) from None
    trigger = CronTrigger.from_crontab(" ".join(translated), timezone=zone)
    if trigger.get_next_fire_time(None, now.astimezone(UTC)) is None:
        raise CommandError(f'the cron expression "{canonical}" never fires (no such date)')
    return canonical


def _aps_crontab(expr: str) -> str:
    """Rewrite numeric weekdays to names: APScheduler 3 reads 0 as Monday, crontab as Sunday."""
    fields = expr.split()
    if len(fields) == 5:
        fields[4] = ",".join(_dow_term(term) for term in fields[4].split(","))
    return " ".join(fields)


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
        raise CommandError(
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


def _local(moment: datetime, zone_name: str) -> str:
    local = moment.astimezone(ZoneInfo(zone_name))
    shape = "%Y-%m-%d %H:%M:%S" if local.second else "%Y-%m-%d %H:%M"
    return f"{local.strftime(shape)} {zone_name}"
