"""Triggers and next-run timing, across DST changes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.date import DateTrigger
from apscheduler.triggers.interval import IntervalTrigger

from core.scheduling import (
    ScheduleSpec,
    build_trigger,
    next_run_after,
)
from tests.unit.scheduling.specs import BERLIN, NEW_YORK, NOW, fires, parse, utc

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
