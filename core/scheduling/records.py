"""Schedule records: a validated spec and the stored schedule as commands, tool and API show it."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal
from zoneinfo import ZoneInfo

from pydantic import BaseModel, ConfigDict, Field, field_validator

from core.messages import Delivery
from core.scheduling.units import format_duration, format_local, parse_duration

__all__ = [
    "ScheduleInfo",
    "ScheduleKind",
    "ScheduleSpec",
    "ScheduleTarget",
    "describe",
    "firing_id_for",
    "firing_message_id",
    "from_timestamp",
    "info_of_row",
    "schedule_fields",
    "spec_of_row",
]

ScheduleKind = Literal["every", "after", "at", "cron"]


class ScheduleSpec(BaseModel):
    """A validated schedule, ready to be stored and turned into a trigger.

    Attributes:
        kind: every, after, at or cron.
        spec: canonical text: the interval for every/after (``1h30m``), the UTC ISO datetime
            for at, the 5-field expression for cron.
        timezone: IANA name the schedule is shown in; cron fields are read in it.
        interval_seconds: the interval (every) or delay (after); None otherwise.
        run_at: aware UTC; the one run for after/at, the first run for every (creation time
            plus one interval, which anchors the series); None for cron.
        prompt: the plain message enqueued on every firing.
    """

    model_config = ConfigDict(frozen=True)

    kind: ScheduleKind
    spec: str
    timezone: str
    interval_seconds: int | None = None
    run_at: datetime | None = None
    prompt: str = Field(min_length=1)

    @field_validator("run_at")
    @classmethod
    def _utc(cls, value: datetime | None) -> datetime | None:
        # Naive values are taken as UTC: SQLite hands back stored datetimes without tzinfo.
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def describe(spec: ScheduleSpec, next_run: datetime | None) -> str:
    """One line for replies, e.g. ``every 5m — next run 2026-11-22 10:05 UTC — "check the build"``.

    Args:
        spec: the schedule.
        next_run: its next fire time (aware), or None when it will not run again.

    Returns:
        Kind and interval or expression, the next run in the schedule's timezone, the prompt.
    """
    if spec.kind in ("every", "after"):
        head = f"{spec.kind} {format_duration(spec.interval_seconds or 0)}"
    elif spec.kind == "cron":
        head = f'cron "{spec.spec}"'
    else:
        head = "once"
    when = "no further runs"
    if next_run is not None:
        when = f"next run {format_local(next_run, spec.timezone)}"
    prompt = " ".join(spec.prompt.split())
    if len(prompt) > 80:
        prompt = prompt[:79] + "…"
    return f'{head} — {when} — "{prompt}"'


@dataclass(frozen=True, slots=True)
class ScheduleTarget:
    """Where a schedule runs: its session, and the chat/thread its replies go to."""

    session_key: str
    delivery: Delivery


@dataclass(frozen=True, slots=True)
class ScheduleInfo:
    """A stored schedule, as commands, the tool and the control API show it.

    ``last_firing_id`` and ``running_message_id`` are the bookkeeping of the latest
    firing: its id and the inbound message it published.
    """

    id: int
    session_key: str
    delivery: Delivery
    spec: ScheduleSpec
    status: str
    created_at: float
    next_run_at: float | None
    last_run_at: float | None
    run_count: int
    last_firing_id: str | None = None
    running_message_id: str | None = None

    @property
    def next_run(self) -> datetime | None:
        return from_timestamp(self.next_run_at)

    def describe(self) -> str:
        """``#3 every 5m — next run 2026-11-22 10:05 UTC — "check the build"``."""
        return (
            f"#{self.id} {describe(self.spec, self.next_run if self.status == 'active' else None)}"
        )

    def _next_run_local(self) -> str | None:
        """The next run in the schedule's timezone, ISO-8601 with its offset."""
        if self.next_run is None:
            return None
        return self.next_run.astimezone(ZoneInfo(self.spec.timezone)).isoformat()

    def as_json(self) -> dict[str, Any]:
        """The control API's shape (times as ISO-8601 UTC, or null; ``next_run_local``
        is the next run in the schedule's own timezone)."""
        last = from_timestamp(self.last_run_at)
        return {
            "id": self.id,
            "session": self.session_key,
            "kind": self.spec.kind,
            "spec": self.spec.spec,
            "timezone": self.spec.timezone,
            "prompt": self.spec.prompt,
            "next_run": None if self.next_run is None else self.next_run.isoformat(),
            "next_run_local": self._next_run_local(),
            "last_run": None if last is None else last.isoformat(),
            "run_count": self.run_count,
            "status": self.status,
        }


def firing_id_for(schedule_id: int, due: datetime) -> str:
    """The firing id of the run of ``schedule_id`` due at ``due`` (the bus dedupes on it)."""
    return f"schedule:{schedule_id}:{due.astimezone(UTC).isoformat()}"


def firing_message_id(firing_id: str) -> str:
    """The inbound message id of a firing: derived from it, so a re-publish is a duplicate."""
    return uuid.uuid5(uuid.NAMESPACE_URL, f"familiar:{firing_id}").hex


def from_timestamp(timestamp: float | None) -> datetime | None:
    return None if timestamp is None else datetime.fromtimestamp(timestamp, UTC)


def schedule_fields(info: ScheduleInfo) -> dict[str, Any]:
    """The fields of a schedule_created / schedule_cancelled payload."""
    data = info.as_json()
    data["schedule_id"] = data.pop("id")
    del data["session"], data["next_run_local"]  # derived: the events keep their shape
    return data


def spec_of_row(row: Mapping[Any, Any]) -> ScheduleSpec:
    """The spec of a stored row (not validated again: it was when created)."""
    kind, text = row["kind"], row["spec"]
    interval: int | None = None
    run_at: datetime | None = None
    if kind in ("every", "after"):
        interval = parse_duration(text)
        run_at = datetime.fromtimestamp(row["anchor"], UTC) + timedelta(seconds=interval)
    elif kind == "at":
        run_at = datetime.fromisoformat(text)
    return ScheduleSpec.model_construct(
        kind=kind,
        spec=text,
        timezone=row["timezone"],
        interval_seconds=interval,
        run_at=run_at,
        prompt=row["prompt"],
    )


def info_of_row(row: Mapping[Any, Any]) -> ScheduleInfo:
    """A stored row (any mapping of its columns) as a ScheduleInfo."""
    return ScheduleInfo(
        id=int(row["id"]),
        session_key=row["session_key"],
        delivery=Delivery.model_validate_json(row["delivery"]),
        spec=spec_of_row(row),
        status=row["status"],
        created_at=row["created_at"],
        next_run_at=row["next_run_at"],
        last_run_at=row["last_run_at"],
        run_count=row["run_count"],
        last_firing_id=row["last_firing_id"],
        running_message_id=row["running_message_id"],
    )
