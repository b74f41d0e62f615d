"""Small dialect helpers shared by the SQL repositories."""

from __future__ import annotations

from functools import cache

from sqlalchemy import Table
from sqlalchemy.dialects import postgresql, sqlite

from core.store.prepared import Prepared

__all__ = ["insert_ignore"]


@cache
def insert_ignore(dialect: str, table: Table) -> Prepared:
    """A reusable ``INSERT ... ON CONFLICT DO NOTHING``; pass the row as parameters.

    Built once per table: SQLAlchemy memoises the statement's cache key on the object,
    and `Prepared` compiles it once for SQLite's driver.
    """
    if dialect == "postgresql":
        return Prepared(postgresql.insert(table).on_conflict_do_nothing())
    return Prepared(sqlite.insert(table).on_conflict_do_nothing())
