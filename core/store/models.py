"""SQLModel tables: sessions, history, events, schedules, approvals (the bus has its own)."""

from __future__ import annotations

from sqlalchemy import Index, Text, false
from sqlmodel import Column, Field, SQLModel

__all__ = [
    "ApprovalRow",
    "EventRow",
    "HistoryRow",
    "LeaseRow",
    "McpStatusRow",
    "ScheduleRow",
    "SessionRow",
]

# Times are unix seconds (float): comparable in SQL on every dialect, no tz ambiguity.


class SessionRow(SQLModel, table=True):
    """A conversation. ``epoch`` grows on /new; the prompt only sees the current epoch."""

    __tablename__ = "sessions"

    key: str = Field(primary_key=True, max_length=512)
    channel: str = Field(default="", max_length=64)
    created_at: float
    updated_at: float
    epoch: int = 0
    summary: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    summary_upto: int = 0
    """History row id up to which ``summary`` covers the current epoch."""
    message_count: int = 0


class HistoryRow(SQLModel, table=True):
    """One message of a session's conversation history."""

    __tablename__ = "history"
    __table_args__ = (
        Index("ix_history_session_epoch_id", "session_key", "epoch", "id"),
        Index("ix_history_session_unread", "session_key", "unread"),
    )

    id: int | None = Field(default=None, primary_key=True)
    session_key: str = Field(max_length=512)
    epoch: int = 0
    inbound_id: str | None = Field(default=None, max_length=64, index=True)
    role: str = Field(max_length=16)
    content: str = Field(default="", sa_column=Column(Text, nullable=False))
    tool_calls: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    tool_call_id: str | None = Field(default=None, max_length=128)
    name: str | None = Field(default=None, max_length=128)
    created_at: float
    unread: bool = Field(default=False, sa_column_kwargs={"server_default": false()})
    """A reply delivered while nobody watched the session (shown when ``chat`` opens)."""


class EventRow(SQLModel, table=True):
    """Append-only event log entry of a session."""

    __tablename__ = "events"
    __table_args__ = (Index("ix_events_session_id", "session_key", "id"),)

    id: int | None = Field(default=None, primary_key=True)
    session_key: str = Field(max_length=512)
    type: str = Field(max_length=64)
    message_id: str | None = Field(default=None, max_length=64)
    data: str = Field(default="{}", sa_column=Column(Text, nullable=False))
    created_at: float


class ScheduleRow(SQLModel, table=True):
    """A scheduled prompt (shown to users as ``#id``); the scheduler re-registers it at start.

    ``anchor`` is the creation time: /every runs fall on anchor + k * interval.
    ``running_message_id`` is the inbound id of the latest firing, so a firing whose
    previous message is still queued or running is skipped instead of stacking.
    """

    __tablename__ = "schedules"
    __table_args__ = (Index("ix_schedules_session_status", "session_key", "status"),)

    id: int | None = Field(default=None, primary_key=True)
    session_key: str = Field(max_length=512)
    channel: str = Field(max_length=64)
    delivery: str = Field(sa_column=Column(Text, nullable=False))
    """The Delivery (JSON) of the message that created it: replies go back there."""
    kind: str = Field(max_length=16)
    spec: str = Field(max_length=256)
    timezone: str = Field(max_length=64)
    prompt: str = Field(sa_column=Column(Text, nullable=False))
    created_at: float
    anchor: float
    next_run_at: float | None = None
    last_run_at: float | None = None
    run_count: int = 0
    status: str = Field(default="active", max_length=16, index=True)
    """active, done (a one-shot that ran or was missed) or cancelled."""
    last_firing_id: str | None = Field(default=None, max_length=128)
    running_message_id: str | None = Field(default=None, max_length=64)


class ApprovalRow(SQLModel, table=True):
    """An ``exec`` command waiting for the user's ``/approve`` or ``/deny`` (shown as ``#id``).

    One per (``message_id``, ``command``): a redelivered turn finds its earlier request.
    ``reported_at`` is set once the outcome was published to the session for the model.
    """

    __tablename__ = "approvals"
    __table_args__ = (Index("ix_approvals_status_expires", "status", "expires_at"),)

    id: str = Field(primary_key=True, max_length=16)
    session_key: str = Field(max_length=512)
    message_id: str = Field(max_length=64, index=True)
    """The inbound message whose turn asked."""
    delivery: str = Field(sa_column=Column(Text, nullable=False))
    """The Delivery (JSON) of that message: the outcome is answered there."""
    command: str = Field(sa_column=Column(Text, nullable=False))
    timeout: float
    command_sha256: str | None = Field(default=None, max_length=64)
    """SHA-256 of the exact command and timeout (``command_digest``): what /approve runs
    must hash the same. None on rows from before it existed (those are refused)."""
    reason: str = Field(sa_column=Column(Text, nullable=False))
    status: str = Field(default="pending", max_length=16)
    """pending, approved, denied or expired."""
    created_at: float
    expires_at: float
    decided_at: float | None = None
    decided_by: str | None = Field(default=None, max_length=256)
    decision_message_id: str | None = Field(default=None, max_length=64)
    """The ``/approve`` or ``/deny`` message that decided it."""
    reported_at: float | None = None


class LeaseRow(SQLModel, table=True):
    """A named lease (the scheduler's leadership): held by ``owner`` until ``until``."""

    __tablename__ = "leases"

    name: str = Field(primary_key=True, max_length=64)
    owner: str = Field(max_length=128)
    until: float
    acquired_at: float


class McpStatusRow(SQLModel, table=True):
    """One MCP server as one agent process sees it (``owner``: ``host/pid/start``);
    ``data`` is its status as JSON. Replaced whenever it changes and refreshed now and
    then, so a reader can tell a process that went away."""

    __tablename__ = "mcp_status"

    owner: str = Field(primary_key=True, max_length=128)
    name: str = Field(primary_key=True, max_length=128)
    data: str = Field(default="{}", sa_column=Column(Text, nullable=False))
    updated_at: float
