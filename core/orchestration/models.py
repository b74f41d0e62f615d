"""The orchestration tables: fleet todos and each session's modes (autopilot, consolidation)."""

from __future__ import annotations

from sqlalchemy import Index, Text
from sqlmodel import Column, Field, SQLModel

__all__ = ["SessionModeRow", "TodoRow"]


class TodoRow(SQLModel, table=True):
    """One todo of a session's plan (``/fleet``): what to do, after what, and who does it."""

    __tablename__ = "todos"
    __table_args__ = (Index("ix_todos_session", "session_key", "seq"),)

    session_key: str = Field(primary_key=True, max_length=512)
    id: str = Field(primary_key=True, max_length=64)
    """The todo's slug (``setup-db``), unique within its session."""
    seq: int = 0
    """Order of creation within the session."""
    title: str = Field(sa_column=Column(Text, nullable=False))
    prompt: str = Field(default="", sa_column=Column(Text, nullable=False))
    agent_type: str = Field(default="general-purpose", max_length=128)
    depends_on: str = Field(default="[]", sa_column=Column(Text, nullable=False))
    """JSON list of the ids of todos that must be done first."""
    status: str = Field(default="pending", max_length=16)
    agent_id: str | None = Field(default=None, max_length=32)
    """The subagent running (or that ran) it."""
    result: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    created_at: float
    updated_at: float


class SessionModeRow(SQLModel, table=True):
    """A session's standing modes: autopilot, and when its memory was last consolidated."""

    __tablename__ = "session_modes"

    session_key: str = Field(primary_key=True, max_length=512)
    autopilot: bool = False
    consolidated_at: float | None = None
    updated_at: float
