"""orchestration: fleet todos per session, and session modes (autopilot, the time of the
last memory consolidation)

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-27 09:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "todos",
        sa.Column("session_key", sa.String(length=512), nullable=False),
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("title", sa.Text(), nullable=False),
        sa.Column("prompt", sa.Text(), nullable=False),
        sa.Column("agent_type", sa.String(length=128), nullable=False),
        sa.Column("depends_on", sa.Text(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("agent_id", sa.String(length=32), nullable=True),
        sa.Column("result", sa.Text(), nullable=True),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("session_key", "id"),
    )
    op.create_index("ix_todos_session", "todos", ["session_key", "seq"])
    op.create_table(
        "session_modes",
        sa.Column("session_key", sa.String(length=512), nullable=False),
        sa.Column("autopilot", sa.Boolean(), nullable=False),
        sa.Column("consolidated_at", sa.Float(), nullable=True),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("session_key"),
    )


def downgrade() -> None:
    op.drop_index("ix_todos_session", table_name="todos")
    op.drop_table("todos")
    op.drop_table("session_modes")
