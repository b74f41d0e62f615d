"""Tests for core.schedule_spec: parsing, validation, triggers and next-run timing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.date import DateTrigger
from apscheduler.triggers.interval import IntervalTrigger

from core.errors import CommandError
from core.schedule_spec import (
    MAX_INTERVAL,
    MIN_INTERVAL,
    ScheduleSpec,
    build_trigger,
    describe,
    format_duration,
    next_run_after,
    parse_command,
    parse_duration,
    validate_spec,
)

NOW = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
BERLIN = ZoneInfo("Europe/Berlin")
NEW_YORK = ZoneInfo("America/New_York")


def parse(command: str, args: str, *, now: datetime = NOW, tz: str = "UTC") -> ScheduleSpec:
    return parse_command(command, args, now=now, default_tz=tz)


def refused(command: str, args: str, *, now: datetime = NOW, tz: str = "UTC") -> str:
    with pytest.raises(CommandError) as info:
        parse_command(command, args, now=now, default_tz=tz)
    return str(info.value)


def utc(
    year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0, us: int = 0
) -> datetime:
    return datetime(year, month, day, hour, minute, second, us, tzinfo=UTC)


def fires(spec: ScheduleSpec, after: datetime, count: int) -> list[datetime]:
    out: list[datetime] = []
    for _ in range(count):
        nxt = next_run_after(spec, after)
        assert nxt is not None
        out.append(nxt)
        after = nxt
    return out


# --- durations ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("30s", 30),
        ("5m", 300),
        ("2h", 7200),
        ("1h30m", 5400),
        ("1d", 86400),
        ("1d2h", 93600),
        ("90s", 90),
        ("1H30M", 5400),
        ("2h5m10s", 7510),
        ("1d1h1m1s", 90061),
        ("0h10m", 600),
        (" 5m ", 300),
    ],
)
def test_parse_duration_accepts(text: str, seconds: int) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(
    "text", ["5", "", "m", "5x", "30m1h", "1h1h", "5 m", "1.5h", "-5m", "5min", "1w", "1e3s"]
)
def test_parse_duration_refuses(text: str) -> None:
    with pytest.raises(CommandError) as info:
        parse_duration(text)
    assert f"can't read the interval '{text.strip()}'" in str(info.value)
    assert "try 30s, 5m, 2h or 1d" in str(info.value)


def test_bare_number_suggests_a_unit() -> None:
    with pytest.raises(CommandError, match=r"add a unit, e\.g\. 5m"):
        parse_duration("5")


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0, "0s"), (10, "10s"), (90, "1m30s"), (300, "5m"), (5400, "1h30m"), (86400, "1d"),
     (86401, "1d1s"), (93600, "1d2h")],
)  # fmt: skip
def test_format_duration(seconds: int, text: str) -> None:
    assert format_duration(seconds) == text
    assert parse_duration(text) == seconds


def test_format_duration_refuses_negative() -> None:
    with pytest.raises(ValueError):
        format_duration(-1)


def test_bounds_constants() -> None:
    assert (MIN_INTERVAL, MAX_INTERVAL) == (10, 86400)


# --- /every and /after --------------------------------------------------------------------


def test_every() -> None:
    spec = parse("every", "1H30M check the build\nand report")
    assert spec == ScheduleSpec(
        kind="every",
        spec="1h30m",
        timezone="UTC",
        interval_seconds=5400,
        run_at=NOW + timedelta(seconds=5400),
        prompt="check the build\nand report",
    )


def test_after() -> None:
    spec = parse("/after", "  90s   stretch  ", tz="Europe/Berlin")
    assert (spec.kind, spec.spec, spec.interval_seconds) == ("after", "1m30s", 90)
    assert spec.run_at == NOW + timedelta(seconds=90)
    assert spec.timezone == "Europe/Berlin"
    assert spec.prompt == "stretch"


@pytest.mark.parametrize("command", ["every", "after"])
@pytest.mark.parametrize("interval", ["10s", "1d", "24h", "1440m", "86400s"])
def test_bounds_are_inclusive(command: str, interval: str) -> None:
    assert parse(command, f"{interval} ping").interval_seconds in (MIN_INTERVAL, MAX_INTERVAL)


@pytest.mark.parametrize(("command", "noun"), [("every", "interval"), ("after", "delay")])
def test_too_short(command: str, noun: str) -> None:
    message = refused(command, "9s ping")
    assert f"the {noun} must be at least 10s" in message
    assert "9s" in message


@pytest.mark.parametrize("interval", ["1d1s", "25h", "2d"])
def test_too_long(interval: str) -> None:
    message = refused("every", f"{interval} ping")
    assert "must be at most 1d" in message
    assert "for longer horizons use /at or /cron" in message


def test_zero_interval_is_too_short() -> None:
    assert "at least 10s" in refused("every", "0s ping")


@pytest.mark.parametrize("command", ["every", "after", "at", "cron"])
def test_empty_arguments_show_usage(command: str) -> None:
    message = refused(command, "   ")
    assert message.startswith(f"usage: /{command} ")
    assert "e.g." in message


def test_missing_prompt() -> None:
    assert refused("every", "5m") == "what should I do every 5m? — e.g. /every 5m check the build"
    assert refused("after", "20m").startswith("what should I do after 20m? — e.g. /after 20m")


def test_unreadable_interval_in_command() -> None:
    message = refused("every", "check the build")
    assert "can't read the interval 'check'" in message
    assert "try 30s, 5m, 2h or 1d" in message


@pytest.mark.parametrize("command", ["every", "after"])
def test_slash_prompt_refused(command: str) -> None:
    message = refused(command, "5m /status")
    assert message == "only plain messages can be scheduled — slash commands are not supported"


def test_unknown_command() -> None:
    assert "unknown schedule kind 'weekly'" in refused("weekly", "5m x")


# --- /at ----------------------------------------------------------------------------------


def test_at_naive_is_in_default_tz() -> None:
    spec = parse("at", "2026-11-23T09:00 summarize my inbox", tz="Europe/Berlin")
    assert spec.run_at == utc(2026, 11, 23, 8, 0)
    assert spec.spec == "2026-11-23T08:00:00+00:00"
    assert spec.timezone == "Europe/Berlin"
    assert spec.interval_seconds is None
    assert spec.prompt == "summarize my inbox"


def test_at_with_space_between_date_and_time() -> None:
    spec = parse("at", "2026-11-23 09:00:30 summarize", tz="America/New_York")
    assert spec.run_at == utc(2026, 11, 23, 14, 0, 30)
    assert spec.prompt == "summarize"


@pytest.mark.parametrize(
    "text", ["2026-11-23T09:00+01:00", "2026-11-23T08:00Z", "2026-11-23 03:00-05:00"]
)
def test_at_aware(text: str) -> None:
    spec = parse("at", f"{text} go", tz="Asia/Tokyo")
    assert spec.run_at == utc(2026, 11, 23, 8, 0)
    assert spec.timezone == "Asia/Tokyo"


def test_at_tz_argument() -> None:
    spec = parse("at", "2026-11-23T09:00 tz=America/New_York go", tz="Europe/Berlin")
    assert spec.run_at == utc(2026, 11, 23, 14, 0)
    assert spec.timezone == "America/New_York"


@pytest.mark.parametrize("text", ["2026-11-22T09:59", "2026-11-22T10:00", "2025-01-01T00:00Z"])
def test_at_in_the_past(text: str) -> None:
    message = refused("at", f"{text} go")
    assert "is in the past" in message
    assert "now is 2026-11-22 10:00 UTC" in message
    assert "give a future time" in message


def test_at_past_in_local_tz() -> None:
    # 10:30 in Berlin is 09:30 UTC: already past at 10:00 UTC.
    message = refused("at", "2026-11-22T10:30 go", tz="Europe/Berlin")
    assert "2026-11-22 10:30 Europe/Berlin is in the past" in message


def test_at_unreadable() -> None:
    message = refused("at", "tomorrow go")
    assert "can't read the date and time 'tomorrow'" in message
    assert "2026-11-23T09:00" in message


def test_at_needs_a_time_of_day() -> None:
    assert "has no time of day" in refused("at", "2026-11-23 go")


def test_at_missing_prompt() -> None:
    message = refused("at", "2026-11-23T09:00", tz="Europe/Berlin")
    assert message.startswith("what should I do at 2026-11-23 09:00 Europe/Berlin?")


def test_at_skipped_local_time() -> None:
    message = refused("at", "2027-03-28T02:30 go", tz="Europe/Berlin")
    assert "2027-03-28 02:30 does not exist in Europe/Berlin" in message


def test_at_repeated_local_time_takes_the_first() -> None:
    spec = parse("at", "2026-11-01T01:30 go", now=utc(2026, 10, 1), tz="America/New_York")
    assert spec.run_at == utc(2026, 11, 1, 5, 30)  # 01:30 EDT, not 01:30 EST


def test_at_slash_prompt_refused() -> None:
    assert "slash commands are not supported" in refused("at", "2026-11-23T09:00 /stop")


# --- /cron --------------------------------------------------------------------------------


def test_cron_quoted_with_tz() -> None:
    spec = parse("cron", '"0  9 * * mon-fri" tz=Europe/Berlin post the standup', tz="UTC")
    assert spec == ScheduleSpec(
        kind="cron",
        spec="0 9 * * mon-fri",
        timezone="Europe/Berlin",
        prompt="post the standup",
    )


def test_cron_unquoted_uses_default_tz() -> None:
    spec = parse("cron", "*/15 8-18 * * 1-5 check the queue", tz="America/New_York")
    assert (spec.spec, spec.timezone, spec.prompt) == (
        "*/15 8-18 * * 1-5",
        "America/New_York",
        "check the queue",
    )


def test_cron_unquoted_with_tz() -> None:
    spec = parse("cron", "0 9 * * * TZ=Asia/Tokyo morning news")
    assert (spec.spec, spec.timezone, spec.prompt) == ("0 9 * * *", "Asia/Tokyo", "morning news")


def test_cron_curly_quotes() -> None:
    assert parse("cron", "“0 9 * * *” hello").spec == "0 9 * * *"


def test_cron_missing_closing_quote() -> None:
    assert "no closing quote" in refused("cron", '"0 9 * * * hello')


@pytest.mark.parametrize("args", ["0 9 * *", '"0 9 * *" hello', '"0 9 * * * *" hello'])
def test_cron_wrong_field_count(args: str) -> None:
    message = refused("cron", args)
    assert "a cron expression has 5 fields (minute hour day-of-month month day-of-week)" in message


@pytest.mark.parametrize(
    ("expr", "field"),
    [
        ("61 * * * *", 'minute (0-59) field "61"'),
        ("0 24 * * *", 'hour (0-23) field "24"'),
        ("0 9 32 * *", 'day-of-month (1-31) field "32"'),
        ("0 9 * 13 *", 'month (1-12 or jan-dec) field "13"'),
        ("0 9 * * funday", 'day-of-week (0-7 or sun-sat) field "funday"'),
        ("x 9 * * *", 'minute (0-59) field "x"'),
    ],
)
def test_cron_bad_field_is_named(expr: str, field: str) -> None:
    message = refused("cron", f'"{expr}" hello')
    assert message.startswith(f'bad cron expression "{expr}": the {field} is invalid (')


def test_cron_bad_field_reason_is_apschedulers() -> None:
    message = refused("cron", '"61 * * * *" hello')
    assert "the last value (61) is higher than the maximum value (59)" in message


@pytest.mark.parametrize("dow", ["8", "5-2", "*/0"])
def test_cron_bad_numeric_weekday(dow: str) -> None:
    message = refused("cron", f'"0 9 * * {dow}" hello')
    assert f'the day-of-week "{dow}" is not valid — use 0-7 (0 and 7 are Sunday)' in message


def test_cron_that_never_fires() -> None:
    assert 'the cron expression "0 0 31 2 *" never fires' in refused("cron", '"0 0 31 2 *" x')


@pytest.mark.parametrize("tz", ["Mars/Base", "europe/berlin", "Europe", "../etc/passwd", ""])
def test_unknown_timezone(tz: str) -> None:
    message = refused("cron", f'"0 9 * * *" tz={tz} hello')
    assert f"unknown timezone '{tz}'" in message
    assert "IANA name like Europe/Berlin" in message


def test_unknown_default_timezone() -> None:
    assert "unknown timezone 'Nowhere/Land'" in refused("every", "5m x", tz="Nowhere/Land")


def test_cron_missing_prompt() -> None:
    message = refused("cron", '"0 9 * * *" tz=Europe/Berlin')
    assert message == (
        'what should I do on "0 9 * * *"? — e.g. /cron "0 9 * * mon-fri" post the standup reminder'
    )
    assert refused("cron", "0 9 * * *").startswith('what should I do on "0 9 * * *"?')


def test_cron_slash_prompt_refused() -> None:
    assert "slash commands are not supported" in refused("cron", '"0 9 * * *" /new')


@pytest.mark.parametrize(
    ("dow", "weekday"),  # crontab numbering: 0 and 7 are Sunday (APScheduler 3 alone: Monday)
    [("0", 6), ("7", 6), ("1", 0), ("6", 5), ("sun", 6), ("mon", 0)],
)
def test_cron_weekday_numbers_follow_crontab(dow: str, weekday: int) -> None:
    spec = parse("cron", f'"0 9 * * {dow}" hello')
    nxt = next_run_after(spec, NOW)
    assert nxt is not None
    assert nxt.weekday() == weekday


def test_cron_weekday_ranges_and_steps() -> None:
    weekdays = parse("cron", '"0 9 * * 1-5" hello')
    days = {d.weekday() for d in fires(weekdays, NOW, 14)}
    assert days == {0, 1, 2, 3, 4}
    every_other = parse("cron", '"0 9 * * */2" hello')  # sun, tue, thu, sat
    assert {d.weekday() for d in fires(every_other, NOW, 8)} == {6, 1, 3, 5}
    weekend = parse("cron", '"0 9 * * 6-7,3" hello')
    assert {d.weekday() for d in fires(weekend, NOW, 9)} == {5, 6, 2}


# --- validate_spec shares the rules -------------------------------------------------------


def test_validate_spec_matches_parse_command() -> None:
    def both(kind: str, spec: str, prompt: str, tz: str | None, args: str) -> None:
        structured = validate_spec(kind, spec, prompt, tz=tz, now=NOW, default_tz="Europe/Berlin")
        typed = parse_command(kind, args, now=NOW, default_tz="Europe/Berlin")
        assert structured == typed

    both("every", "1h30m", "check", None, "1h30m check")
    both("after", " 90S ", "stretch", None, "90s stretch")
    both("at", "2026-11-23T09:00", "go", "Asia/Tokyo", "2026-11-23T09:00 tz=Asia/Tokyo go")
    both("cron", '"0 9 * * 1-5"', " standup ", "UTC", "0 9 * * 1-5 tz=UTC standup")


@pytest.mark.parametrize(
    ("kind", "spec", "prompt", "tz", "expected"),
    [
        ("every", "9s", "x", None, "must be at least 10s"),
        ("after", "1d1s", "x", None, "must be at most 1d"),
        ("every", "5", "x", None, "can't read the interval '5'"),
        ("every", "5m", "  ", None, "what should I do every 5m?"),
        ("every", "5m", "/status", None, "slash commands are not supported"),
        ("every", "", "x", None, "usage: /every"),
        ("at", "2020-01-01T00:00", "x", None, "is in the past"),
        ("cron", "0 9 * *", "x", None, "has 5 fields"),
        ("cron", "0 9 * * 8", "x", None, 'day-of-week "8" is not valid'),
        ("cron", "0 9 * * *", "x", "Mars/Base", "unknown timezone 'Mars/Base'"),
        ("daily", "5m", "x", None, "unknown schedule kind 'daily'"),
    ],
)
def test_validate_spec_refuses(
    kind: str, spec: str, prompt: str, tz: str | None, expected: str
) -> None:
    with pytest.raises(CommandError, match=expected.replace("(", r"\(").replace("?", r"\?")):
        validate_spec(kind, spec, prompt, tz=tz, now=NOW, default_tz="UTC")


def test_validate_spec_tz_applies_to_intervals() -> None:
    spec = validate_spec("every", "5m", "x", tz="Asia/Tokyo", now=NOW, default_tz="UTC")
    assert spec.timezone == "Asia/Tokyo"


# --- model --------------------------------------------------------------------------------


def test_spec_is_frozen_and_run_at_is_utc() -> None:
    spec = ScheduleSpec(
        kind="at",
        spec="x",
        timezone="UTC",
        run_at=datetime(2026, 11, 23, 9, 0, tzinfo=BERLIN),
        prompt="p",
    )
    assert spec.run_at == utc(2026, 11, 23, 8, 0)
    assert spec.run_at is not None and spec.run_at.tzinfo is UTC
    naive = spec.model_copy(update={"run_at": None})
    assert naive.run_at is None
    from_db = ScheduleSpec.model_validate(
        {
            "kind": "at",
            "spec": "x",
            "timezone": "UTC",
            "run_at": datetime(2026, 1, 1),
            "prompt": "p",
        }
    )
    assert from_db.run_at == utc(2026, 1, 1)
    with pytest.raises(ValueError):
        spec.prompt = "other"  # type: ignore[misc]


# --- triggers -----------------------------------------------------------------------------


def test_build_trigger_every_first_run_is_now_plus_interval() -> None:
    spec = parse("every", "5m ping")
    trigger = build_trigger(spec)
    assert isinstance(trigger, IntervalTrigger)
    assert trigger.get_next_fire_time(None, NOW) == NOW + timedelta(minutes=5)
    # Re-registered after a restart it keeps the creation-time rhythm.
    later = NOW + timedelta(minutes=12)
    assert trigger.get_next_fire_time(None, later) == NOW + timedelta(minutes=15)


def test_build_trigger_every_with_anchor() -> None:
    spec = parse("every", "10m ping", now=NOW + timedelta(hours=1))
    trigger = build_trigger(spec, anchor=NOW + timedelta(minutes=3))
    assert trigger.get_next_fire_time(None, NOW + timedelta(hours=1)) == NOW + timedelta(
        hours=1, minutes=3
    )


@pytest.mark.parametrize(("command", "args"), [("after", "20m x"), ("at", "2026-11-23T09:00 x")])
def test_build_trigger_one_shot(command: str, args: str) -> None:
    spec = parse(command, args)
    trigger = build_trigger(spec)
    assert isinstance(trigger, DateTrigger)
    assert trigger.get_next_fire_time(None, NOW) == spec.run_at
    assert trigger.get_next_fire_time(spec.run_at, NOW) is None


def test_build_trigger_cron() -> None:
    spec = parse("cron", '"0 9 * * 0" tz=Europe/Berlin hello')
    trigger = build_trigger(spec)
    assert isinstance(trigger, CronTrigger)
    assert str(trigger.timezone) == "Europe/Berlin"
    fire = trigger.get_next_fire_time(None, NOW)
    assert fire == datetime(2026, 11, 29, 9, 0, tzinfo=BERLIN)  # a Sunday


# --- next_run_after -----------------------------------------------------------------------


def test_next_run_every_is_on_the_anchor_grid() -> None:
    spec = parse("every", "5m ping")
    assert next_run_after(spec, NOW) == NOW + timedelta(minutes=5)
    assert next_run_after(spec, NOW - timedelta(hours=1)) == NOW + timedelta(minutes=5)
    assert next_run_after(spec, NOW + timedelta(minutes=5)) == NOW + timedelta(minutes=10)
    assert next_run_after(spec, NOW + timedelta(minutes=7, seconds=1)) == NOW + timedelta(
        minutes=10
    )
    day_later = NOW + timedelta(days=1, microseconds=1)
    assert next_run_after(spec, day_later) == NOW + timedelta(days=1, minutes=5)


def test_next_run_every_explicit_anchor_and_aware_input() -> None:
    spec = parse("every", "1h ping")
    anchor = utc(2026, 1, 1, 0, 17)
    after = datetime(2026, 11, 22, 12, 0, tzinfo=BERLIN)  # 11:00 UTC
    nxt = next_run_after(spec, after, anchor=anchor)
    assert nxt == utc(2026, 11, 22, 11, 17)
    assert nxt is not None and nxt.tzinfo is UTC


def test_next_run_every_ignores_dst() -> None:
    spec = parse("every", "1d ping", now=utc(2026, 3, 28, 8, 0), tz="Europe/Berlin")
    assert fires(spec, utc(2026, 3, 28, 8, 0), 3) == [
        utc(2026, 3, 29, 8, 0),
        utc(2026, 3, 30, 8, 0),
        utc(2026, 3, 31, 8, 0),
    ]


@pytest.mark.parametrize(("command", "args"), [("after", "20m x"), ("at", "2026-11-23T09:00 x")])
def test_next_run_one_shot(command: str, args: str) -> None:
    spec = parse(command, args)
    assert spec.run_at is not None
    assert next_run_after(spec, NOW) == spec.run_at
    assert next_run_after(spec, spec.run_at - timedelta(microseconds=1)) == spec.run_at
    assert next_run_after(spec, spec.run_at) is None
    assert next_run_after(spec, spec.run_at + timedelta(days=1)) is None


def test_next_run_cron_is_strictly_after() -> None:
    spec = parse("cron", '"*/15 * * * *" hello')
    assert next_run_after(spec, NOW) == utc(2026, 11, 22, 10, 15)
    assert next_run_after(spec, NOW - timedelta(seconds=1)) == NOW
    assert next_run_after(spec, utc(2026, 11, 22, 10, 14, 59, 999999)) == utc(2026, 11, 22, 10, 15)


def test_next_run_cron_that_stops() -> None:
    spec = ScheduleSpec(kind="cron", spec="0 0 29 2 *", timezone="UTC", prompt="leap")
    assert next_run_after(spec, utc(2027, 1, 1)) == utc(2028, 2, 29)
    assert next_run_after(spec, utc(9996, 3, 1)) is None


def test_cron_daily_berlin_keeps_local_time_across_both_dst_changes() -> None:
    spec = parse("cron", '"0 9 * * *" tz=Europe/Berlin hello')
    spring = fires(spec, utc(2026, 3, 27, 12), 3)
    assert spring == [utc(2026, 3, 28, 8), utc(2026, 3, 29, 7), utc(2026, 3, 30, 7)]
    autumn = fires(spec, utc(2026, 10, 23, 12), 3)
    assert autumn == [utc(2026, 10, 24, 7), utc(2026, 10, 25, 8), utc(2026, 10, 26, 8)]
    for fire in spring + autumn:
        assert fire.astimezone(BERLIN).hour == 9
        assert fire.tzinfo is UTC


def test_cron_daily_new_york_keeps_local_time_across_both_dst_changes() -> None:
    spec = parse("cron", '"0 9 * * *" tz=America/New_York hello')
    spring = fires(spec, utc(2026, 3, 6, 18), 3)  # DST starts Sun 2026-03-08
    assert spring == [utc(2026, 3, 7, 14), utc(2026, 3, 8, 13), utc(2026, 3, 9, 13)]
    autumn = fires(spec, utc(2026, 10, 30, 18), 3)  # DST ends Sun 2026-11-01
    assert autumn == [utc(2026, 10, 31, 13), utc(2026, 11, 1, 14), utc(2026, 11, 2, 14)]
    for fire in spring + autumn:
        assert fire.astimezone(NEW_YORK).hour == 9


def test_cron_in_skipped_hour_fires_once_an_hour_late_berlin() -> None:
    # 02:30 does not exist on 2026-03-29 in Berlin: APScheduler fires at 01:30 UTC = 03:30 CEST.
    spec = parse("cron", '"30 2 * * *" tz=Europe/Berlin night job')
    assert fires(spec, utc(2026, 3, 27, 12), 3) == [
        utc(2026, 3, 28, 1, 30),  # 02:30 CET
        utc(2026, 3, 29, 1, 30),  # 03:30 CEST: the skipped 02:30, one hour late
        utc(2026, 3, 30, 0, 30),  # 02:30 CEST
    ]


def test_cron_in_skipped_hour_fires_once_an_hour_late_new_york() -> None:
    spec = parse("cron", '"30 2 * * *" tz=America/New_York night job')
    assert fires(spec, utc(2026, 3, 6, 18), 3) == [
        utc(2026, 3, 7, 7, 30),  # 02:30 EST
        utc(2026, 3, 8, 7, 30),  # 03:30 EDT
        utc(2026, 3, 9, 6, 30),  # 02:30 EDT
    ]


def test_cron_in_repeated_hour_fires_twice() -> None:
    # On fall-back day the repeated local time happens twice and APScheduler fires at both.
    berlin = parse("cron", '"30 2 * * *" tz=Europe/Berlin night job')
    assert fires(berlin, utc(2026, 10, 24, 12), 3) == [
        utc(2026, 10, 25, 0, 30),  # 02:30 CEST
        utc(2026, 10, 25, 1, 30),  # 02:30 CET
        utc(2026, 10, 26, 1, 30),
    ]
    new_york = parse("cron", '"30 1 * * *" tz=America/New_York night job')
    assert fires(new_york, utc(2026, 10, 31, 12), 3) == [
        utc(2026, 11, 1, 5, 30),  # 01:30 EDT
        utc(2026, 11, 1, 6, 30),  # 01:30 EST
        utc(2026, 11, 2, 6, 30),
    ]


def test_next_run_cron_matches_the_trigger() -> None:
    spec = parse("cron", '"*/20 6-8 * * mon-fri" tz=Europe/Berlin hello')
    trigger = build_trigger(spec)
    after = utc(2026, 10, 23, 0)
    previous = None
    for _ in range(20):
        expected = trigger.get_next_fire_time(previous, after)
        assert next_run_after(spec, after) == expected.astimezone(UTC)
        previous = after = expected


# --- describe -----------------------------------------------------------------------------


def test_describe_every() -> None:
    spec = parse("every", "5m check the build")
    assert describe(spec, next_run_after(spec, NOW)) == (
        'every 5m — next run 2026-11-22 10:05 UTC — "check the build"'
    )


def test_describe_shows_seconds_and_local_time() -> None:
    spec = parse("after", "90s stretch", tz="Europe/Berlin")
    assert describe(spec, spec.run_at) == (
        'after 1m30s — next run 2026-11-22 11:01:30 Europe/Berlin — "stretch"'
    )


def test_describe_at_and_cron() -> None:
    at = parse("at", "2026-11-23T09:00 summarize", tz="America/New_York")
    assert describe(at, at.run_at) == (
        'once — next run 2026-11-23 09:00 America/New_York — "summarize"'
    )
    assert describe(at, None) == 'once — no further runs — "summarize"'
    cron = parse("cron", '"0 9 * * mon-fri" tz=Europe/Berlin standup')
    assert describe(cron, next_run_after(cron, NOW)) == (
        'cron "0 9 * * mon-fri" — next run 2026-11-23 09:00 Europe/Berlin — "standup"'
    )


def test_describe_keeps_one_line() -> None:
    spec = parse("every", "1d " + "word\n" * 40)
    line = describe(spec, None)
    assert "\n" not in line
    assert line.endswith('…"')
    assert len(line) < 120
