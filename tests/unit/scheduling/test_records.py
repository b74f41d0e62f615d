"""How a schedule reads in replies."""

from __future__ import annotations

from core.scheduling import (
    describe,
    next_run_after,
)
from tests.unit.scheduling.specs import NOW, parse

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
