"""The ``mcp_tasks`` and ``mcp_elicitations`` tables (no SDK import: the store loads them)."""

from __future__ import annotations

from sqlalchemy import Index, Text
from sqlmodel import Column, Field, SQLModel

__all__ = ["McpElicitationRow", "McpTaskRow"]


class McpTaskRow(SQLModel, table=True):
    """The MCP side of an ``mcp-task`` record (``subagent_tasks`` row of the same id):
    the server, tool and the server's task id, and which process polls it (a lease, so
    a restart or another worker takes over a task whose poller went away)."""

    __tablename__ = "mcp_tasks"
    __table_args__ = (
        Index("ix_mcp_tasks_remote", "server", "remote_id"),
        Index("ix_mcp_tasks_token", "progress_token"),
    )

    id: str = Field(primary_key=True, max_length=32)
    server: str = Field(max_length=128)
    tool: str = Field(max_length=256)
    remote_id: str = Field(max_length=256)
    remote_status: str = Field(max_length=32)
    status_message: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    poll_ms: int | None = None
    progress_token: str = Field(max_length=128)
    root_key: str = Field(max_length=512)
    """The session a person talks to at the top of the caller's chain (questions go there)."""
    lease_owner: str | None = Field(default=None, max_length=128)
    lease_until: float = 0.0
    created_at: float


class McpElicitationRow(SQLModel, table=True):
    """A question of an MCP server to the person (``elicitation/create``), asked in the
    root session of the call, answered with ``/answer`` or ``/decline`` (from any
    process: the asking one waits for the row)."""

    __tablename__ = "mcp_elicitations"
    __table_args__ = (Index("ix_mcp_elicitations_session", "session_key", "status"),)

    id: str = Field(primary_key=True, max_length=16)
    server: str = Field(max_length=128)
    session_key: str = Field(max_length=512)
    delivery: str = Field(sa_column=Column(Text, nullable=False))
    mode: str = Field(max_length=8)
    message: str = Field(sa_column=Column(Text, nullable=False))
    requested_schema: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    url: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    task_id: str | None = Field(default=None, max_length=32)
    status: str = Field(max_length=16)
    """pending, accept, decline or cancel."""
    content: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    created_at: float
    expires_at: float
    answered_at: float | None = None
