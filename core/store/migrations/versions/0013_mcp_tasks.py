"""mcp_tasks and mcp_elicitations: MCP tools run as tasks (the server's task id, its
poller's lease) and servers' questions to the person

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-27 09:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "mcp_tasks",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("server", sa.String(length=128), nullable=False),
        sa.Column("tool", sa.String(length=256), nullable=False),
        sa.Column("remote_id", sa.String(length=256), nullable=False),
        sa.Column("remote_status", sa.String(length=32), nullable=False),
        sa.Column("status_message", sa.Text(), nullable=True),
        sa.Column("poll_ms", sa.Integer(), nullable=True),
        sa.Column("progress_token", sa.String(length=128), nullable=False),
        sa.Column("root_key", sa.String(length=512), nullable=False),
        sa.Column("lease_owner", sa.String(length=128), nullable=True),
        sa.Column("lease_until", sa.Float(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_mcp_tasks_remote", "mcp_tasks", ["server", "remote_id"])
    op.create_index("ix_mcp_tasks_token", "mcp_tasks", ["progress_token"])
    op.create_table(
        "mcp_elicitations",
        sa.Column("id", sa.String(length=16), nullable=False),
        sa.Column("server", sa.String(length=128), nullable=False),
        sa.Column("session_key", sa.String(length=512), nullable=False),
        sa.Column("delivery", sa.Text(), nullable=False),
        sa.Column("mode", sa.String(length=8), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("requested_schema", sa.Text(), nullable=True),
        sa.Column("url", sa.Text(), nullable=True),
        sa.Column("task_id", sa.String(length=32), nullable=True),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("content", sa.Text(), nullable=True),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("expires_at", sa.Float(), nullable=False),
        sa.Column("answered_at", sa.Float(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_mcp_elicitations_session", "mcp_elicitations", ["session_key", "status"])


def downgrade() -> None:
    op.drop_table("mcp_elicitations")
    op.drop_table("mcp_tasks")
