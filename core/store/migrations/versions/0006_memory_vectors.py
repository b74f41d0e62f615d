"""memory vectors: one embedding per entry and model, for optional semantic recall

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-23 12:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    postgres = op.get_bind().dialect.name == "postgresql"
    vector: sa.types.TypeEngine[object] = (
        postgresql.ARRAY(sa.REAL()) if postgres else sa.LargeBinary()
    )
    op.create_table(
        "memory_vectors",
        sa.Column(
            "entry_id",
            sa.Integer(),
            sa.ForeignKey("memory_entries.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("model", sa.String(length=128), nullable=False),
        sa.Column("dims", sa.Integer(), nullable=False),
        sa.Column("vector", vector, nullable=False),
        sa.PrimaryKeyConstraint("entry_id"),
    )
    op.create_index("ix_memory_vectors_model", "memory_vectors", ["model"])


def downgrade() -> None:
    op.drop_index("ix_memory_vectors_model", table_name="memory_vectors")
    op.drop_table("memory_vectors")
