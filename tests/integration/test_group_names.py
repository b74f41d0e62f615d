"""A member's name belongs to one assistant while it is active: decided in the roster's
own transaction, so neither two assistants starting together nor an assistant that
went quiet for a moment can end up sharing it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest
import sqlalchemy as sa

from core.errors import ConfigError
from core.group.roster import Roster, Snapshot
from core.group.tables import group_members
from core.store.config import StoreConfig
from core.store.engine import Store

pytestmark = pytest.mark.postgres


@pytest.fixture
async def stores(pg_url: str) -> AsyncIterator[dict[str, Store]]:
    opened = {name: Store(url=pg_url, config=StoreConfig(schema=name)) for name in ("home", "work")}
    for store in opened.values():
        await store.open(migrate=False)
    try:
        yield opened
    finally:
        for store in opened.values():
            await store.close()


def _snapshot(schema: str) -> Snapshot:
    return Snapshot(
        name="same",
        description=f"the {schema} assistant",
        identity="",
        version="1.0",
        capabilities={"tools": []},
        host="h1",
        store_schema=schema,
        started_at=datetime.now(UTC),
    )


async def _schema_of_row(store: Store) -> str | None:
    rows = await store.fetch(sa.select(group_members.c.store_schema))
    assert len(rows) == 1
    return rows[0]["store_schema"]  # type: ignore[no-any-return]


async def test_two_assistants_starting_together_get_the_name_once(
    stores: dict[str, Store],
) -> None:
    home, work = (Roster(stores[n], expire_after=60) for n in ("home", "work"))
    await home.ensure_tables()
    outcomes = await asyncio.gather(
        home.announce(_snapshot("home"), starting=True),
        work.announce(_snapshot("work"), starting=True),
        return_exceptions=True,
    )
    refused = [o for o in outcomes if isinstance(o, ConfigError)]
    assert len(refused) == 1, outcomes
    assert "taken by an active member of another assistant" in str(refused[0])
    winner = "home" if outcomes[0] == "group.joined" else "work"
    assert await _schema_of_row(stores["home"]) == winner


async def test_a_heartbeat_never_takes_the_name_from_the_assistant_holding_it(
    stores: dict[str, Store],
) -> None:
    home, work = (Roster(stores[n], expire_after=60) for n in ("home", "work"))
    await home.ensure_tables()
    assert await home.announce(_snapshot("home"), starting=True) == "group.joined"
    await home.leave("same")  # home stopped: the name is free
    assert await work.announce(_snapshot("work"), starting=True) == "group.joined"
    # a heartbeat of the old holder (a process left running) must not take it back
    with pytest.raises(ConfigError, match="taken by an active member of another assistant"):
        await home.announce(_snapshot("home"))
    assert await _schema_of_row(stores["home"]) == "work"
    await work.leave("same")
    assert await home.announce(_snapshot("home"), starting=True) == "group.joined"
    assert await _schema_of_row(stores["home"]) == "home"
