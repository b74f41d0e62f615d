"""The [scheduler] section: plain validation (ValueError), never the slash-command parser."""

from __future__ import annotations

from datetime import UTC, datetime, time

import pytest
from pydantic import ValidationError

from core.scheduling import HeartbeatConfig, SchedulerConfig, parse_active_hours, within_hours


def test_config_validates_its_values() -> None:
    assert SchedulerConfig().misfire_grace == 300 and SchedulerConfig().heartbeat.every is None
    assert HeartbeatConfig(every="90m").every == "1h30m"
    for bad in ({"every": "5s"}, {"every": "2d"}, {"every": "soon"}, {"active_hours": "8-22"}):
        with pytest.raises(ValidationError):
            HeartbeatConfig.model_validate(bad)
    with pytest.raises(ValidationError, match="unknown timezone"):
        SchedulerConfig(timezone="Mars/Olympus")
    with pytest.raises(ValidationError):
        SchedulerConfig.model_validate({"heartbeat": {"every": "30m", "typo": 1}})


def test_active_hours() -> None:
    day = parse_active_hours("08:00-22:00")
    night = parse_active_hours("22:00-06:30")
    assert parse_active_hours("00:00-24:00") == (time(0), time(0))

    def at(hour: int, minute: int = 0) -> datetime:
        return datetime(2035, 1, 1, hour, minute, tzinfo=UTC)

    assert within_hours(at(8), day) and within_hours(at(21, 59), day)
    assert not within_hours(at(22), day) and not within_hours(at(7, 59), day)
    assert within_hours(at(23), night) and within_hours(at(6, 29), night)
    assert not within_hours(at(12), night)
    assert within_hours(at(3), parse_active_hours("00:00-24:00"))
    assert within_hours(at(3), None)


def test_config_errors_read_like_the_commands() -> None:
    with pytest.raises(ValidationError, match="can't read the interval 'soon'"):
        HeartbeatConfig(every="soon")
    with pytest.raises(ValidationError, match="must be between 10s and 1d, not '5s'"):
        HeartbeatConfig(every="5s")
    assert SchedulerConfig(timezone=" Europe/Berlin ").timezone == "Europe/Berlin"
