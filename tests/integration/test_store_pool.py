"""The PostgreSQL connection pool: connections the server closed are replaced at checkout."""

from __future__ import annotations

import asyncpg
import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url

from core.store.engine import Store
from tests.waiting import eventually

pytestmark = pytest.mark.postgres


async def test_pooled_connections_the_server_closed_are_replaced(pg_url: str) -> None:
    store = Store(url=pg_url)
    await store.open()
    try:

        def backend(conn: object) -> int:
            return int(conn.execute(text("SELECT pg_backend_pid()")).scalar_one())  # type: ignore[attr-defined]

        pooled = {await store.transact(backend), await store.write_one(backend)}
        url = make_url(pg_url)
        admin = await asyncpg.connect(
            host=url.host, port=url.port, user=url.username, database=url.database
        )
        try:
            for pid in pooled:
                assert await admin.fetchval("SELECT pg_terminate_backend($1)", pid)

            # A backend leaves pg_stat_activity on its way out, after it has told its
            # client (FATAL 57P01); its socket closes as the process exits.
            async def gone() -> bool:
                query = "SELECT count(*) FROM pg_stat_activity WHERE pid = ANY($1::int[])"
                return await admin.fetchval(query, list(pooled)) == 0

            await eventually(gone, timeout=10, what="the terminated backends exited")
        finally:
            await admin.close()
        # Each kind of use gets a live connection at its first try.
        assert await store.transact(backend) not in pooled
        assert await store.write_one(backend) not in pooled
        async with store.read() as conn:
            assert (await conn.execute(text("SELECT 1"))).scalar_one() == 1
    finally:
        await store.close()
