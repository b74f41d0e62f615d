"""A clock tests move by hand (injected wherever code asks for "now")."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

# Far in the future: APScheduler's real timer never reaches runs scheduled from here,
# so every firing in a test happens when the test says.
T0 = datetime(2035, 3, 1, 9, 0, tzinfo=UTC)


class ManualClock:
    """Returns ``now``; ``advance`` moves it forward."""

    def __init__(self, now: datetime = T0) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)
