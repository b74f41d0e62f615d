"""Alembic migrations, applied programmatically on an open connection at start.

A database already at the newest revision (every start but the first after an
upgrade, and every role process after the first) is recognised with one query,
without importing alembic: that import costs each process ~0.25 s and ~10 MiB.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import inspect, text
from sqlalchemy.engine import Connection

if TYPE_CHECKING:
    from alembic.config import Config

__all__ = ["alembic_config", "current_revision", "head_revision", "upgrade_to_head"]

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
VERSION_TABLE = "alembic_version"


def alembic_config(connection: Connection | None = None, schema: str | None = None) -> Config:
    """An alembic Config pointing at our migrations (no alembic.ini needed).

    ``schema`` (``store.schema``) holds the version table: the search path falls back to
    ``public`` (for extensions such as pgvector), whose own version table, when another
    assistant uses it, must not be taken for this schema's.
    """
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    if connection is not None:
        cfg.attributes["connection"] = connection
    cfg.attributes["schema"] = schema
    return cfg


@cache
def head_revision() -> str:
    """The newest migration's revision id.

    Each file in ``versions/`` is named ``<revision>_<slug>.py`` with a four-digit
    revision, one after the other (a test holds this against alembic's own head).
    """
    names = (MIGRATIONS_DIR / "versions").glob("[0-9][0-9][0-9][0-9]_*.py")
    return max(path.name[:4] for path in names)


def current_revision(connection: Connection, schema: str | None = None) -> str | None:
    """The revision the database (``schema``, if given) is at; None if never migrated."""
    if not inspect(connection).has_table(VERSION_TABLE, schema=schema):
        return None
    table = VERSION_TABLE if schema is None else f'"{schema}".{VERSION_TABLE}'
    row = connection.execute(text(f"SELECT version_num FROM {table}")).first()
    return None if row is None else str(row[0])


def upgrade_to_head(connection: Connection, schema: str | None = None) -> None:
    """Run every pending migration on ``connection`` (a sync connection from run_sync).

    ``schema``: ``store.schema``, already first on the connection's search path.
    """
    if current_revision(connection, schema) == head_revision():
        return
    from alembic import command

    command.upgrade(alembic_config(connection, schema), "head")
