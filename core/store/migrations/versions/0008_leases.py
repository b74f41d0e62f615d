"""leases: named leases held by one process at a time (the scheduler leader), and the
owner of a reply's delivery lease (so a restart re-sends what a dead sender held at once)

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-23 02:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "leases",
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("owner", sa.String(length=128), nullable=False),
        sa.Column("until", sa.Float(), nullable=False),
        sa.Column("acquired_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("name"),
    )
    with op.batch_alter_table("outbound") as batch:
        batch.add_column(sa.Column("lease_owner", sa.String(length=128), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("outbound") as batch:
        batch.drop_column("lease_owner")
    op.drop_table("leases")
