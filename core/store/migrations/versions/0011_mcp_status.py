"""mcp_status: each agent process's view of its MCP servers (state, error, tools), which
the process serving ``familiar status`` and ``familiar mcp list`` reads in multi mode

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-27 06:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "mcp_status",
        sa.Column("owner", sa.String(length=128), nullable=False),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("data", sa.Text(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("owner", "name"),
    )


def downgrade() -> None:
    op.drop_table("mcp_status")
