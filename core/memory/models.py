"""Memory tables: entries (searched through FTS5 / tsvector) and pending compaction jobs."""

from __future__ import annotations

from sqlalchemy import Index, Text
from sqlmodel import Column, Field, SQLModel

__all__ = ["FTS_TABLE", "CompactionJobRow", "MemoryRow"]

FTS_TABLE = "memory_fts"
"""SQLite's FTS5 index of ``memory_entries`` (external content; kept by triggers).
PostgreSQL has a generated ``tsv`` column with a GIN index instead. Both are made by
migration 0004 only: they are dialect-specific, so they are not on these models."""


class MemoryRow(SQLModel, table=True):
    """A remembered entry. ``scope`` is a session key or ``global``."""

    __tablename__ = "memory_entries"
    __table_args__ = (
        Index("ix_memory_scope_updated", "scope", "updated_at"),
        Index("ix_memory_path", "path"),
        # Ids are never reused (migration 0010): a stale id must not forget another entry.
        {"sqlite_autoincrement": True},
    )

    id: int | None = Field(default=None, primary_key=True)
    scope: str = Field(max_length=512)
    scope_token: str = Field(max_length=32)
    """The scope as one search token (see `core.memory.search.scope_token`): the
    full-text index filters by scope itself instead of after ranking every match."""
    text: str = Field(sa_column=Column(Text, nullable=False))
    tags: str = Field(default="[]", sa_column=Column(Text, nullable=False))
    """JSON list of strings."""
    source: str | None = Field(default=None, max_length=256)
    """What made it: ``message:<id>`` (the remember call's message) or ``file:<path>``."""
    path: str | None = Field(default=None, max_length=512)
    """For a chunk of a workspace memory file: its workspace-relative path."""
    created_at: float
    updated_at: float


class CompactionJobRow(SQLModel, table=True):
    """A session whose history outgrew its budget: summarise up to ``upto`` (one per session).

    Written in the transaction that settles the reply, so a crash never loses it; a
    worker leases it (``owner``, ``leased_until``) and deletes it once the summary is in.
    """

    __tablename__ = "compaction_jobs"

    session_key: str = Field(primary_key=True, max_length=512)
    epoch: int
    upto: int
    """History row id up to which the turn found history outside the window."""
    requested_at: float
    attempts: int = 0
    owner: str | None = Field(default=None, max_length=128)
    leased_until: float = 0.0
