"""Assistants on one PostgreSQL database (one ``store.schema`` each) do not wait for each
other's locks: the subagent cap's advisory lock is per schema."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import sqlalchemy as sa
from sqlalchemy.exc import DBAPIError

from core.store.engine import Store
from core.tasks.repository import TaskRepository
from tests.integration.schema_stores import schema_stores

pytestmark = pytest.mark.postgres


@pytest.fixture
async def stores(pg_url: str) -> AsyncIterator[dict[str, Store]]:
    async with schema_stores(pg_url) as opened:
        yield opened


async def _count_quickly(store: Store) -> int:
    """The cap's count, giving up when its lock is held for more than 0.5 s."""
    async with store.engine.begin() as conn:
        await conn.execute(sa.text("SET LOCAL lock_timeout = '500ms'"))
        return await conn.run_sync(TaskRepository.running_in)


async def test_the_subagent_cap_lock_is_each_assistants_own(stores: dict[str, Store]) -> None:
    async with stores["home"].engine.begin() as holding:
        await holding.run_sync(TaskRepository.running_in)  # home is spawning
        assert await _count_quickly(stores["work"]) == 0  # another assistant: not blocked
        with pytest.raises(DBAPIError, match="lock timeout"):
            await _count_quickly(stores["home"])  # home's own spawns still take turns
