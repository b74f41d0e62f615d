"""The group's shared tables, in the fixed schema ``familiar_group`` every member sees.

They are not alembic's (each assistant migrates its own ``store.schema``; this schema
belongs to none of them): `ensure_group_tables` creates whatever is missing, under an
advisory lock so that members starting together do not race. A table added here later
is created by the next start of any member; changing a column needs a step of its own.
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

__all__ = [
    "GROUP_METADATA",
    "GROUP_NOTIFY_CHANNEL",
    "GROUP_SCHEMA",
    "ensure_group_tables",
    "group_members",
    "group_tasks",
    "group_timeline",
]

GROUP_SCHEMA = "familiar_group"
GROUP_NOTIFY_CHANNEL = "familiar_group"
"""The LISTEN/NOTIFY channel of group wake-ups (payloads: see `core.group.signals`)."""
_DDL_LOCK = 0x66616D67  # any constant: one advisory lock key for the group's DDL

GROUP_METADATA = sa.MetaData(schema=GROUP_SCHEMA)

group_members = sa.Table(
    "group_members",
    GROUP_METADATA,
    sa.Column("name", sa.String(64), primary_key=True),
    sa.Column("description", sa.Text, nullable=False, server_default=""),
    sa.Column("identity", sa.Text, nullable=False, server_default=""),
    sa.Column("version", sa.String(64), nullable=False, server_default=""),
    sa.Column("capabilities", sa.JSON, nullable=False),
    sa.Column("host", sa.String(255), nullable=False, server_default=""),
    sa.Column("store_schema", sa.String(64), nullable=True),
    sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("last_heartbeat", sa.DateTime(timezone=True), nullable=False),
    # joined, left (stopped) or gone (its expiry was recorded by a peer)
    sa.Column("state", sa.String(16), nullable=False),
)

group_timeline = sa.Table(
    "group_timeline",
    GROUP_METADATA,
    sa.Column("id", sa.BigInteger, sa.Identity(), primary_key=True),
    sa.Column("at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
    sa.Column("member", sa.String(64), nullable=False),
    sa.Column("kind", sa.String(32), nullable=False),
    sa.Column("detail", sa.JSON, nullable=False),
    sa.Index("ix_group_timeline_at", "at"),
)


async def ensure_group_tables(conn: AsyncConnection) -> None:
    """Create the schema and every table of `GROUP_METADATA` that is missing (idempotent;
    ``conn`` is in a transaction, which holds the lock until it ends)."""
    await conn.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": _DDL_LOCK})
    await conn.execute(sa.text(f'CREATE SCHEMA IF NOT EXISTS "{GROUP_SCHEMA}"'))
    await conn.run_sync(GROUP_METADATA.create_all, checkfirst=True)


# -- delegation (core.group.task_rows) ---------------------------------------------------

group_tasks = sa.Table(
    "group_tasks",
    GROUP_METADATA,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column("caller", sa.String(64), nullable=False),
    sa.Column("peer", sa.String(64), nullable=False),
    sa.Column("prompt", sa.Text, nullable=False),
    sa.Column("description", sa.Text, nullable=False, server_default=""),
    sa.Column("mode", sa.String(16), nullable=False),
    # queued, running, done, failed, refused
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("result", sa.Text, nullable=True),
    sa.Column("error", sa.Text, nullable=True),
    # epoch seconds by the database's clock: the peer's liveness for the task
    sa.Column("lease_until", sa.Float, nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("updated_at", sa.Float, nullable=False),
    sa.Index("ix_group_tasks_peer", "peer", "status"),
    sa.Index("ix_group_tasks_caller", "caller", "status"),
)
