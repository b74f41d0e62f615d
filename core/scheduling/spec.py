"""Parse and validate schedules: /every, /after, /at, /cron and the manage_schedule tool."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import TypeVar, cast, get_args
from zoneinfo import ZoneInfo

from core.errors import CommandError
from core.scheduling.records import ScheduleKind, ScheduleSpec
from core.scheduling.recurrence import check_cron, cron_field_count_error
from core.scheduling.units import (
    MAX_INTERVAL,
    MIN_INTERVAL,
    format_duration,
    format_local,
    parse_duration,
    zone_name,
)

__all__ = ["parse_command", "validate_spec"]

_T = TypeVar("_T")
_KINDS: tuple[str, ...] = get_args(ScheduleKind)
_DATE_RE = re.compile(r"\d{4}-\d{2}-\d{2}")
_TIME_RE = re.compile(r"\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?", re.I)
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


def _plain(read: Callable[[str], _T], text: str) -> _T:
    """Run a plain value reader, its ValueError becoming the user-facing CommandError."""
    try:
        return read(text)
    except ValueError as exc:
        raise CommandError(str(exc)) from None


def _build(
    kind: ScheduleKind, spec: str, prompt: str, *, tz: str | None, now: datetime, default_tz: str
) -> ScheduleSpec:
    zone = _plain(zone_name, tz if tz is not None else default_tz)
    interval: int | None = None
    run_at: datetime | None = None
    if kind in ("every", "after"):
        interval = _bounded(kind, spec)
        spec = format_duration(interval)
        run_at = now.astimezone(UTC) + timedelta(seconds=interval)
        shown = spec
    elif kind == "at":
        run_at = _future_datetime(spec, ZoneInfo(zone), now)
        spec = run_at.isoformat()
        shown = format_local(run_at, zone)
    else:
        spec = _plain(partial(check_cron, zone=ZoneInfo(zone), now=now), spec)
        shown = f'"{spec}"'
    _check_prompt(kind, shown, prompt)
    return ScheduleSpec(
        kind=kind, spec=spec, timezone=zone, interval_seconds=interval, run_at=run_at, prompt=prompt
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
    seconds = _plain(parse_duration, text)
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
        raise CommandError(cron_field_count_error(text, len(words)))
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
            f"{format_local(run_at, zone.key)} is in the past"
            f" (now is {format_local(now, zone.key)}) — give a future time"
        )
    return run_at
