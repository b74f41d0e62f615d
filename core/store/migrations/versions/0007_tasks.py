"""subagent tasks: the TaskRegistry's records

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-23 02:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "subagent_tasks",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("owner_key", sa.String(length=512), nullable=False),
        sa.Column("child_key", sa.String(length=512), nullable=False),
        sa.Column("spawn_key", sa.String(length=200), nullable=True),
        sa.Column("agent_type", sa.String(length=128), nullable=False),
        sa.Column("name", sa.String(length=128), nullable=True),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("prompt", sa.Text(), nullable=False),
        sa.Column("model", sa.String(length=200), nullable=True),
        sa.Column("mode", sa.String(length=16), nullable=False),
        sa.Column("multi_turn", sa.Boolean(), nullable=False),
        sa.Column("memory_mode", sa.String(length=32), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("result", sa.Text(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("turns", sa.Integer(), nullable=False),
        sa.Column("tool_calls", sa.Integer(), nullable=False),
        sa.Column("last_intent", sa.String(length=256), nullable=True),
        sa.Column("depth", sa.Integer(), nullable=False),
        sa.Column("delivery", sa.Text(), nullable=False),
        sa.Column("snapshot", sa.Text(), nullable=True),
        sa.Column("message_id", sa.String(length=64), nullable=True),
        sa.Column("handoff", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.Column("finished_at", sa.Float(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_subagent_tasks_owner", "subagent_tasks", ["owner_key", "created_at"])
    op.create_index("ix_subagent_tasks_status", "subagent_tasks", ["status"])
    op.create_index("ix_subagent_tasks_spawn_key", "subagent_tasks", ["spawn_key"])


def downgrade() -> None:
    op.drop_index("ix_subagent_tasks_spawn_key", table_name="subagent_tasks")
    op.drop_index("ix_subagent_tasks_status", table_name="subagent_tasks")
    op.drop_index("ix_subagent_tasks_owner", table_name="subagent_tasks")
    op.drop_table("subagent_tasks")
