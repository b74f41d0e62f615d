"""Schedule records: the stored schedule as the service, commands and API show it."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from core.messages import Delivery
from core.schedule_spec import ScheduleSpec, describe, parse_duration

__all__ = [
    "ScheduleInfo",
    "ScheduleTarget",
    "event_data",
    "firing_id_for",
    "firing_message_id",
    "from_timestamp",
    "info_of_row",
    "spec_of_row",
]


@dataclass(frozen=True, slots=True)
class ScheduleTarget:
    """Where a schedule runs: its session, and the chat/thread its replies go to."""

    session_key: str
    delivery: Delivery


@dataclass(frozen=True, slots=True)
class ScheduleInfo:
    """A stored schedule, as commands, the tool and the control API show it."""

    id: int
    session_key: str
    delivery: Delivery
    spec: ScheduleSpec
    status: str
    created_at: float
    next_run_at: float | None
    last_run_at: float | None
    run_count: int

    @property
    def next_run(self) -> datetime | None:
        return from_timestamp(self.next_run_at)

    def describe(self) -> str:
        """``#3 every 5m — next run 2026-11-22 10:05 UTC — "check the build"``."""
        return (
            f"#{self.id} {describe(self.spec, self.next_run if self.status == 'active' else None)}"
        )

    def as_json(self) -> dict[str, Any]:
        """The control API's shape (times as ISO-8601 UTC, or null)."""
        last = from_timestamp(self.last_run_at)
        return {
            "id": self.id,
            "session": self.session_key,
            "kind": self.spec.kind,
            "spec": self.spec.spec,
            "timezone": self.spec.timezone,
            "prompt": self.spec.prompt,
            "next_run": None if self.next_run is None else self.next_run.isoformat(),
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


def spec_of_row(row: Mapping[Any, Any]) -> ScheduleSpec:
    kind, text = row["kind"], row["spec"]
    interval: int | None = None
    run_at: datetime | None = None
    if kind in ("every", "after"):
        interval = parse_duration(text)
        run_at = datetime.fromtimestamp(row["anchor"], UTC) + timedelta(seconds=interval)
    elif kind == "at":
        run_at = datetime.fromisoformat(text)
    # Stored rows were validated when created: skip validating them again.
    return ScheduleSpec.model_construct(
        kind=kind,
        spec=text,
        timezone=row["timezone"],
        interval_seconds=interval,
        run_at=run_at,
        prompt=row["prompt"],
    )


def info_of_row(row: Mapping[Any, Any]) -> ScheduleInfo:
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
    )


def event_data(info: ScheduleInfo) -> dict[str, Any]:
    data = info.as_json()
    data["schedule_id"] = data.pop("id")
    del data["session"]
    return data
