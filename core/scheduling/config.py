"""Configuration of scheduling: the ``[scheduler]`` section and its heartbeat."""

from __future__ import annotations

import re
from datetime import time

from pydantic import BaseModel, ConfigDict, Field, field_validator

from core.scheduling.units import (
    MAX_INTERVAL,
    MIN_INTERVAL,
    format_duration,
    parse_duration,
    zone_name,
)

__all__ = ["HeartbeatConfig", "SchedulerConfig", "parse_active_hours"]

_ACTIVE_HOURS_RE = re.compile(r"(\d{1,2}):(\d{2})\s*-\s*(\d{1,2}):(\d{2})")


def parse_active_hours(text: str) -> tuple[time, time]:
    """Read ``HH:MM-HH:MM`` (end exclusive; ``24:00`` ends at midnight; may wrap midnight).

    Raises:
        ValueError: the text is not two times or the range is empty.
    """
    match = _ACTIVE_HOURS_RE.fullmatch(text.strip())
    if match is None:
        raise ValueError(f"active_hours must look like 08:00-22:00, not {text!r}")
    h1, m1, h2, m2 = (int(g) for g in match.groups())
    if h1 > 23 or m1 > 59 or h2 > 24 or m2 > 59 or (h2 == 24 and m2 != 0):
        raise ValueError(f"active_hours has an invalid time: {text!r}")
    start, end = time(h1, m1), time(0, 0) if h2 == 24 else time(h2, m2)
    if start == end and h2 != 24:
        raise ValueError(f"active_hours is an empty range: {text!r}")
    return start, end


class HeartbeatConfig(BaseModel):
    """The optional periodic check-in driven by ``<workspace>/HEARTBEAT.md``.

    Attributes:
        every: interval like ``30m``; None (default) turns the heartbeat off.
        active_hours: ``HH:MM-HH:MM`` in the scheduler timezone; outside it no check-in
            happens. None means all day.
        session: the session key the check-ins run in (its own, so its context stays small).
        deliver_to: session key whose chat receives replies other than ``HEARTBEAT_OK``
            (e.g. ``cli:default`` or ``slack:T1:C1``): they go to the channel, chat and
            thread of that session's latest user message. None keeps them only in the
            heartbeat session's history and the log.
    """

    model_config = ConfigDict(extra="forbid")

    every: str | None = None
    active_hours: str | None = None
    session: str = Field(default="heartbeat:main", min_length=1, max_length=512)
    deliver_to: str | None = Field(default=None, min_length=1, max_length=512)

    @field_validator("every")
    @classmethod
    def _interval(cls, value: str | None) -> str | None:
        if value is None:
            return None
        seconds = parse_duration(value)
        if not MIN_INTERVAL <= seconds <= MAX_INTERVAL:
            raise ValueError(
                f"must be between {format_duration(MIN_INTERVAL)} and"
                f" {format_duration(MAX_INTERVAL)}, not {value!r}"
            )
        return format_duration(seconds)

    @field_validator("active_hours")
    @classmethod
    def _hours(cls, value: str | None) -> str | None:
        if value is not None:
            parse_active_hours(value)
        return value


class SchedulerConfig(BaseModel):
    """The ``[scheduler]`` section.

    Attributes:
        timezone: IANA zone for schedules that name none and for active hours; None uses
            the host's local zone.
        misfire_grace: seconds a run may be late (daemon down, loop stalled) and still
            fire once; later runs are skipped, and the event log says so.
        heartbeat: the optional check-in.
        max_per_session: active schedules one conversation may have (a webhook caller
            or a Slack user must not be able to pile up recurring prompts without end).
        leader_lease: seconds the scheduler leader's database lease lasts (with several
            processes or hosts): another scheduler takes over at most this long after
            the leader dies. Renewed every third of it.
    """

    model_config = ConfigDict(extra="forbid")

    timezone: str | None = None
    misfire_grace: float = Field(default=300.0, ge=0)
    heartbeat: HeartbeatConfig = Field(default_factory=HeartbeatConfig)
    max_per_session: int = Field(default=100, ge=1)
    leader_lease: float = Field(default=15.0, ge=1.0, le=3600.0)

    @field_validator("timezone")
    @classmethod
    def _zone(cls, value: str | None) -> str | None:
        return None if value is None else zone_name(value)
