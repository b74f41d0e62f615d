"""Scheduled prompts: specs, schedule rows, the timer, commands, the tool and the heartbeat."""

from __future__ import annotations

from .commands import parse_schedule_id, register_schedule_commands, schedule_created_reply
from .config import HeartbeatConfig, SchedulerConfig, parse_active_hours
from .heartbeat import HEARTBEAT_FILE, HEARTBEAT_OK, HeartbeatService, within_hours
from .records import (
    ScheduleInfo,
    ScheduleKind,
    ScheduleSpec,
    ScheduleTarget,
    describe,
    firing_id_for,
    firing_message_id,
)
from .recurrence import build_trigger, next_run_after
from .service import ScheduleService, target_for_session
from .spec import parse_command, validate_spec
from .tool import manage_schedule
from .units import MAX_INTERVAL, MIN_INTERVAL, format_duration, parse_duration

__all__ = [
    "HEARTBEAT_FILE",
    "HEARTBEAT_OK",
    "MAX_INTERVAL",
    "MIN_INTERVAL",
    "HeartbeatConfig",
    "HeartbeatService",
    "ScheduleInfo",
    "ScheduleKind",
    "ScheduleService",
    "ScheduleSpec",
    "ScheduleTarget",
    "SchedulerConfig",
    "build_trigger",
    "describe",
    "firing_id_for",
    "firing_message_id",
    "format_duration",
    "manage_schedule",
    "next_run_after",
    "parse_active_hours",
    "parse_command",
    "parse_duration",
    "parse_schedule_id",
    "register_schedule_commands",
    "schedule_created_reply",
    "target_for_session",
    "validate_spec",
    "within_hours",
]
