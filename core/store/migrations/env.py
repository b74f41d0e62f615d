"""Alembic environment: runs on the connection handed in by core.store.migrate."""

from __future__ import annotations

from alembic import context
from sqlmodel import SQLModel

import core.store.models  # noqa: F401  (registers the tables on SQLModel.metadata)

target_metadata = SQLModel.metadata
connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("run migrations through core.store.migrate (needs a connection)")
context.configure(connection=connection, target_metadata=target_metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
