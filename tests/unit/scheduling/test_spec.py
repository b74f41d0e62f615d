"""Parsing and validating schedules: /every, /after, /at, /cron and validate_spec."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from core.errors import CommandError
from core.scheduling import (
    MAX_INTERVAL,
    MIN_INTERVAL,
    ScheduleSpec,
    next_run_after,
    parse_command,
    validate_spec,
)
from tests.unit.scheduling.specs import BERLIN, NOW, fires, parse, refused, utc

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
