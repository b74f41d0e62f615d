"""Alembic environment: runs on the connection handed in by core.store.migrate."""

from __future__ import annotations

from alembic import context
from sqlmodel import SQLModel

import core.bus.tables
import core.mcp.rows
import core.memory.models
import core.orchestration.models
import core.store.models
import core.tasks.records  # noqa: F401  (registers the tables on SQLModel.metadata)

target_metadata = SQLModel.metadata
connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("run migrations through core.store.migrate (needs a connection)")


def include_name(name: str | None, type_: str, _parents: object) -> bool:
    # Made by migrations 0005 (full text) and 0006 (vectors) per dialect, not on the
    # models: autogenerate must leave them.
    if type_ == "table":
        return not (name or "").startswith(("memory_fts", "memory_vectors"))
    return not (type_ == "column" and name == "tsv")


context.configure(
    connection=connection,
    target_metadata=target_metadata,
    render_as_batch=True,
    include_name=include_name,
    version_table_schema=context.config.attributes.get("schema"),
)
with context.begin_transaction():
    context.run_migrations()
