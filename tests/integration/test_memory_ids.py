"""Memory ids are never reused (SQLite AUTOINCREMENT, migration 0010; PostgreSQL's
sequence), and migrating an existing database keeps its entries, index and vectors."""

from __future__ import annotations

import struct
from pathlib import Path

from sqlalchemy import text
from sqlalchemy.engine import Connection

from core.memory.config import MemoryConfig
from core.memory.search import scope_token
from core.memory.service import Caller, MemoryService
from core.store.engine import Store
from core.store.migrate import alembic_config, head_revision

ALICE = Caller("cli:alice")


async def test_a_forgotten_id_is_never_given_again(store: Store) -> None:
    memory = MemoryService(store=store, config=MemoryConfig())
    first = await memory.remember(ALICE, "the boiler is serviced in May")
    newest = await memory.remember(ALICE, "the spare key is under the blue pot")
    await memory.forget(ALICE, newest.id)
    again = await memory.remember(ALICE, "the bins go out on Thursday")
    assert again.id > newest.id
    await memory.forget(ALICE, again.id)
    await memory.forget(ALICE, first.id)  # an empty table still remembers the highest id
    last = await memory.remember(ALICE, "the piano tuner comes twice a year")
    assert last.id > again.id
    assert await memory.get(newest.id) is None


def _at_0008(conn: Connection) -> None:
    from alembic import command

    command.upgrade(alembic_config(conn), "0008")


def _fill(conn: Connection) -> None:
    for entry_id, words in ((1, "boiler service in may"), (2, "spare key under the pot")):
        conn.execute(
            text(
                "INSERT INTO memory_entries (id, scope, scope_token, text, tags, created_at, "
                "updated_at) VALUES (:id, 'cli:alice', :token, :text, '[]', 1.0, 1.0)"
            ),
            {"id": entry_id, "token": scope_token("cli:alice"), "text": words},
        )
    conn.execute(
        text("INSERT INTO memory_vectors (entry_id, model, dims, vector) VALUES (2, 'm', 2, :v)"),
        {"v": struct.pack("<2f", 0.5, 0.25)},
    )


def _upgrade(conn: Connection) -> None:
    from alembic import command

    command.upgrade(alembic_config(conn), "head")


async def test_migrating_keeps_entries_search_and_vectors(tmp_path: Path) -> None:
    store = Store(url=f"sqlite+aiosqlite:///{tmp_path / 'familiar.db'}")
    await store.open(migrate=False)
    try:
        async with store.engine.begin() as conn:
            await conn.run_sync(_at_0008)
            await conn.run_sync(_fill)
            await conn.run_sync(_upgrade)
            version = (await conn.execute(text("SELECT version_num FROM alembic_version"))).scalar()
            vectors = (
                await conn.execute(text("SELECT entry_id, vector FROM memory_vectors"))
            ).all()
            ddl = (
                await conn.execute(
                    text("SELECT sql FROM sqlite_master WHERE name = 'memory_entries'")
                )
            ).scalar()
        assert version == head_revision()
        assert vectors == [(2, struct.pack("<2f", 0.5, 0.25))]
        assert "AUTOINCREMENT" in str(ddl)
    finally:
        await store.close()

    store = Store(url=f"sqlite+aiosqlite:///{tmp_path / 'familiar.db'}")
    await store.open()
    try:
        memory = MemoryService(store=store, config=MemoryConfig())
        assert [e.id for e in await memory.recall(ALICE, "boiler")] == [1]
        assert [e.id for e in await memory.recall(ALICE, "spare key")] == [2]
        await memory.forget(ALICE, 2)  # the triggers keep the index: gone from search
        assert await memory.recall(ALICE, "spare key") == []
        async with store.read() as conn:  # and the cascade still takes its vector
            left = (await conn.execute(text("SELECT count(*) FROM memory_vectors"))).scalar()
        assert left == 0
        added = await memory.remember(ALICE, "the spare key moved to the shed")
        assert added.id == 3
        assert [e.id for e in await memory.recall(ALICE, "shed")] == [3]
    finally:
        await store.close()
