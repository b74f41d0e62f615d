"""approvals: exec commands waiting for the user's /approve or /deny

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-23 10:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "approvals",
        sa.Column("id", sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
        sa.Column("session_key", sqlmodel.sql.sqltypes.AutoString(length=512), nullable=False),
        sa.Column("message_id", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("delivery", sa.Text(), nullable=False),
        sa.Column("command", sa.Text(), nullable=False),
        sa.Column("timeout", sa.Float(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("status", sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("expires_at", sa.Float(), nullable=False),
        sa.Column("decided_at", sa.Float(), nullable=True),
        sa.Column("decided_by", sqlmodel.sql.sqltypes.AutoString(length=256), nullable=True),
        sa.Column(
            "decision_message_id", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=True
        ),
        sa.Column("reported_at", sa.Float(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_approvals_status_expires", "approvals", ["status", "expires_at"])
    op.create_index("ix_approvals_message_id", "approvals", ["message_id"])


def downgrade() -> None:
    op.drop_index("ix_approvals_message_id", table_name="approvals")
    op.drop_index("ix_approvals_status_expires", table_name="approvals")
    op.drop_table("approvals")
