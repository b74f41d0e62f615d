"""memory: entries with full-text search (FTS5 / tsvector + GIN), compaction jobs

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-23 10:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_SQLITE_FTS = (
    "CREATE VIRTUAL TABLE memory_fts USING fts5(text, tags, scope_token, content='memory_entries', "
    "content_rowid='id', tokenize='unicode61 remove_diacritics 2')",
    "CREATE TRIGGER memory_ai AFTER INSERT ON memory_entries BEGIN "
    "INSERT INTO memory_fts(rowid, text, tags, scope_token) VALUES (new.id, new.text, new.tags, new.scope_token); END",
    "CREATE TRIGGER memory_ad AFTER DELETE ON memory_entries BEGIN "
    "INSERT INTO memory_fts(memory_fts, rowid, text, tags, scope_token) "
    "VALUES ('delete', old.id, old.text, old.tags, old.scope_token); END",
    "CREATE TRIGGER memory_au AFTER UPDATE ON memory_entries BEGIN "
    "INSERT INTO memory_fts(memory_fts, rowid, text, tags, scope_token) "
    "VALUES ('delete', old.id, old.text, old.tags, old.scope_token); "
    "INSERT INTO memory_fts(rowid, text, tags, scope_token) VALUES (new.id, new.text, new.tags, new.scope_token); END",
)
_PG_FTS = (
    "ALTER TABLE memory_entries ADD COLUMN tsv tsvector GENERATED ALWAYS AS "
    "(setweight(to_tsvector('simple', text || ' ' || tags), 'A') || "
    "setweight(to_tsvector('simple', scope_token), 'D')) STORED",
    "CREATE INDEX ix_memory_tsv ON memory_entries USING gin (tsv)",
)


def upgrade() -> None:
    op.create_table(
        "memory_entries",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("scope", sqlmodel.sql.sqltypes.AutoString(length=512), nullable=False),
        sa.Column("scope_token", sqlmodel.sql.sqltypes.AutoString(length=32), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("tags", sa.Text(), nullable=False),
        sa.Column("source", sqlmodel.sql.sqltypes.AutoString(length=256), nullable=True),
        sa.Column("path", sqlmodel.sql.sqltypes.AutoString(length=512), nullable=True),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_memory_scope_updated", "memory_entries", ["scope", "updated_at"])
    op.create_index("ix_memory_path", "memory_entries", ["path"])
    op.create_table(
        "compaction_jobs",
        sa.Column("session_key", sqlmodel.sql.sqltypes.AutoString(length=512), nullable=False),
        sa.Column("epoch", sa.Integer(), nullable=False),
        sa.Column("upto", sa.Integer(), nullable=False),
        sa.Column("requested_at", sa.Float(), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("owner", sqlmodel.sql.sqltypes.AutoString(length=128), nullable=True),
        sa.Column("leased_until", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("session_key"),
    )
    dialect = op.get_bind().dialect.name
    for statement in _SQLITE_FTS if dialect == "sqlite" else _PG_FTS:
        op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        for name in ("memory_ai", "memory_ad", "memory_au"):
            op.execute(f"DROP TRIGGER IF EXISTS {name}")
        op.execute("DROP TABLE IF EXISTS memory_fts")
    op.drop_table("compaction_jobs")
    op.drop_index("ix_memory_path", table_name="memory_entries")
    op.drop_index("ix_memory_scope_updated", table_name="memory_entries")
    op.drop_table("memory_entries")
