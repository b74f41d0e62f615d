"""approval digest: the SHA-256 of the exact command (and timeout) an approval was asked
for; /approve runs only a command that hashes the same

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-27 04:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Rows from before have none: /approve refuses them (they were shown cut short).
    with op.batch_alter_table("approvals") as batch:
        batch.add_column(sa.Column("command_sha256", sa.String(length=64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("approvals") as batch:
        batch.drop_column("command_sha256")
