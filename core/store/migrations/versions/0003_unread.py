"""history.unread: replies delivered to a CLI session while nobody watched

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-22 23:20:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("history") as batch:
        batch.add_column(
            sa.Column("unread", sa.Boolean(), nullable=False, server_default=sa.false())
        )
    op.create_index("ix_history_session_unread", "history", ["session_key", "unread"])


def downgrade() -> None:
    op.drop_index("ix_history_session_unread", table_name="history")
    with op.batch_alter_table("history") as batch:
        batch.drop_column("unread")
