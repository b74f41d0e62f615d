"""Alembic migrations, applied programmatically on an open connection at start."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy.engine import Connection

__all__ = ["alembic_config", "upgrade_to_head"]

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"


def alembic_config(connection: Connection | None = None) -> Config:
    """An alembic Config pointing at our migrations (no alembic.ini needed)."""
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    if connection is not None:
        cfg.attributes["connection"] = connection
    return cfg


def upgrade_to_head(connection: Connection) -> None:
    """Run every pending migration on ``connection`` (a sync connection from run_sync)."""
    command.upgrade(alembic_config(connection), "head")
