"""The bus's own tables: inbound queue, outbound replies, dedupe keys.

Only ``core.bus`` reads or writes them (an import-linter contract keeps it so); every
other part asks the bus.
"""

from __future__ import annotations

from sqlalchemy import Index, Text
from sqlmodel import Column, Field, SQLModel

__all__ = ["DedupeRow", "InboundRow", "OutboundRow"]


class InboundRow(SQLModel, table=True):
    """A durable inbound message; status pending -> claimed -> done|failed."""

    __tablename__ = "inbound"
    __table_args__ = (
        Index("ix_inbound_status_seq", "status", "seq"),
        Index("ix_inbound_session_status", "session_key", "status"),
    )

    seq: int | None = Field(default=None, primary_key=True)
    id: str = Field(max_length=64, unique=True)
    session_key: str = Field(max_length=512)
    status: str = Field(default="pending", max_length=16)
    control: bool = False
    """Control messages (/stop) may be claimed while their session is busy."""
    payload: str = Field(sa_column=Column(Text, nullable=False))
    lease_owner: str | None = Field(default=None, max_length=128)
    lease_until: float | None = None
    attempts: int = 0
    created_at: float
    finished_at: float | None = None


class OutboundRow(SQLModel, table=True):
    """A durable final reply waiting for (or done with) delivery."""

    __tablename__ = "outbound"
    __table_args__ = (Index("ix_outbound_channel_status", "channel", "status", "next_attempt_at"),)

    id: str = Field(primary_key=True, max_length=80)
    inbound_id: str = Field(max_length=64, index=True)
    session_key: str = Field(max_length=512)
    channel: str = Field(max_length=64)
    payload: str = Field(sa_column=Column(Text, nullable=False))
    status: str = Field(default="pending", max_length=16)
    attempts: int = 0
    next_attempt_at: float = 0.0
    lease_owner: str | None = Field(default=None, max_length=128)
    """The process sending it right now (its lease ends at ``next_attempt_at``)."""
    last_error: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    created_at: float
    delivered_at: float | None = None


class DedupeRow(SQLModel, table=True):
    """A platform event id or idempotency key already accepted, and its message id."""

    __tablename__ = "dedupe"
    key: str = Field(primary_key=True, max_length=512)
    message_id: str = Field(max_length=64)
    created_at: float = Field(index=True)
