"""Small dialect helpers shared by the SQL repositories."""

from __future__ import annotations

from functools import cache

from sqlalchemy import Table
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.sql.dml import Insert

__all__ = ["insert_ignore"]


@cache
def insert_ignore(dialect: str, table: Table) -> Insert:
    """A reusable ``INSERT ... ON CONFLICT DO NOTHING``; pass the row as parameters.

    Built once per table: SQLAlchemy memoises the statement's cache key on the object,
    so each execution finds its compiled form in the engine's cache at once.
    """
    if dialect == "postgresql":
        return postgresql.insert(table).on_conflict_do_nothing()
    return sqlite.insert(table).on_conflict_do_nothing()
