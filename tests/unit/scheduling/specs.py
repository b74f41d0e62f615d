"""Shared helpers of the scheduling unit tests: a fixed now and spec shortcuts."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from core.errors import CommandError
from core.scheduling import ScheduleSpec, next_run_after, parse_command

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
