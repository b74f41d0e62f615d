"""Stores of several assistants on one PostgreSQL database, one ``store.schema`` each."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

from core.store.config import StoreConfig
from core.store.engine import Store

__all__ = ["schema_stores"]


@asynccontextmanager
async def schema_stores(
    url: str, names: Sequence[str] = ("home", "work"), *, migrate: bool = True
) -> AsyncIterator[dict[str, Store]]:
    """An open store per schema name (migrated, unless ``migrate`` is False: the group's
    own tables are not an assistant's), closed at the end."""
    opened = {name: Store(url=url, config=StoreConfig(schema=name)) for name in names}
    try:
        for store in opened.values():
            await store.open(migrate=migrate)
        yield opened
    finally:
        for store in opened.values():
            await store.close()
