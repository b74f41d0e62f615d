"""Plain value readers: durations and time zones raise ValueError, not CommandError."""

from __future__ import annotations

import pytest

from core.errors import CommandError
from core.scheduling import (
    MAX_INTERVAL,
    MIN_INTERVAL,
    format_duration,
    parse_duration,
)
from core.scheduling.units import zone_name

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
    with pytest.raises(ValueError) as info:
        parse_duration(text)
    assert f"can't read the interval '{text.strip()}'" in str(info.value)
    assert "try 30s, 5m, 2h or 1d" in str(info.value)


def test_bare_number_suggests_a_unit() -> None:
    with pytest.raises(ValueError, match=r"add a unit, e\.g\. 5m"):
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


def test_zone_name_is_a_plain_check() -> None:
    assert zone_name(" Europe/Berlin ") == "Europe/Berlin"
    with pytest.raises(ValueError, match="unknown timezone 'Mars/Base'") as info:
        zone_name("Mars/Base")
    assert not isinstance(info.value, CommandError)
