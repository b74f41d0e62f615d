"""Configuration of the store."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["StoreConfig"]


class StoreConfig(BaseModel):
    """Where familiar keeps its state.

    ``url`` is an SQLAlchemy async URL. Unset means the embedded SQLite file
    ``familiar.db`` in the home directory (the gateway fills it in).
    """

    model_config = ConfigDict(extra="forbid")

    url: str | None = None
    """SQLAlchemy async URL, e.g. ``postgresql+asyncpg://user:password@host/db`` (the
    ``postgres`` extra); unset: the SQLite file ``familiar.db`` in the home."""
    busy_timeout_ms: int = Field(default=5000, ge=0)
    """SQLite only: how long a statement waits for another connection's lock before failing."""
    pool_size: int = Field(default=10, ge=1)
    """Connections to a database server per process, at most (no overflow): every role
    process has its own pool, so the sum stays under the server's ``max_connections``."""
    echo: bool = False
    """Log every SQL statement (SQLAlchemy's ``echo``), for debugging: very verbose."""
