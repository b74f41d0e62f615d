"""Configuration of the store."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = ["RESERVED_SCHEMAS", "StoreConfig"]

RESERVED_SCHEMAS = frozenset({"familiar_group", "information_schema", "public"})
"""Schemas ``store.schema`` may not name: the group's shared one, the catalog's, and
PostgreSQL's default (leave ``schema`` unset for that)."""
_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,47}")


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
    search_schema: str | None = Field(default=None, alias="schema")
    """PostgreSQL only: the schema that holds this assistant's tables (created if
    missing). Different schemas on one database are different assistants (sessions,
    bus, memory, schedules apart); the same schema is one assistant's replicas. Unset:
    the database's default search path. Lowercase letters, digits and ``_``, at most
    48 characters; an error with SQLite."""

    @field_validator("search_schema")
    @classmethod
    def _schema_name(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if not _SCHEMA_NAME.fullmatch(value) or value.startswith("pg_"):
            raise ValueError(
                "must be lowercase letters, digits and _ (not starting with a digit or "
                f"pg_), at most 48 characters: {value!r}"
            )
        if value in RESERVED_SCHEMAS:
            raise ValueError(f"{value!r} is reserved; choose a schema of this assistant's own")
        return value
