"""Small dialect helpers shared by the SQL repositories."""

from __future__ import annotations

from typing import Any

from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.sql.dml import Insert
from sqlmodel import SQLModel

__all__ = ["insert_ignore"]


def insert_ignore(dialect: str, model: type[SQLModel], values: dict[str, Any]) -> Insert:
    """``INSERT ... ON CONFLICT DO NOTHING`` for SQLite and PostgreSQL."""
    table = model.__table__  # type: ignore[attr-defined]
    if dialect == "postgresql":
        return postgresql.insert(table).values(**values).on_conflict_do_nothing()
    return sqlite.insert(table).values(**values).on_conflict_do_nothing()
