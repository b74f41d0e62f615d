"""memory ids: never reused (SQLite AUTOINCREMENT), so a stale id cannot forget another entry

SQLite hands out ``max(rowid) + 1``: forgetting the newest entry made its id the next
one's. ``AUTOINCREMENT`` keeps the highest id ever used in ``sqlite_sequence``. The table
is recreated (batch mode) with its rows and ids; the FTS5 index is keyed by those ids
and stays valid, its triggers (dropped with the old table) are made again, and the
vectors, which the old table's drop would delete by ``ON DELETE CASCADE``, are put
back. PostgreSQL's ``serial`` sequence never reuses a value: nothing to do there.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-27 04:00:00.000000
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_TRIGGERS = (
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
_KEPT_VECTORS = "_memory_vectors_kept"


def _recreate(*, autoincrement: bool) -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    # Triggers go with the old table (none fires for its rows: SQLite drops them first).
    op.execute(f"CREATE TEMP TABLE {_KEPT_VECTORS} AS SELECT * FROM memory_vectors")
    with op.batch_alter_table(
        "memory_entries",
        recreate="always",
        table_kwargs={"sqlite_autoincrement": autoincrement},
    ):
        pass
    for statement in _TRIGGERS:
        op.execute(statement)
    op.execute(
        "INSERT INTO memory_vectors (entry_id, model, dims, vector) "
        f"SELECT entry_id, model, dims, vector FROM {_KEPT_VECTORS}"
    )
    op.execute(f"DROP TABLE {_KEPT_VECTORS}")


def upgrade() -> None:
    _recreate(autoincrement=True)


def downgrade() -> None:
    _recreate(autoincrement=False)
