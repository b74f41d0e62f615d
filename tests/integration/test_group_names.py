"""A member's name belongs to one assistant until the roster forgets it (an operator's
``familiar group forget``, or retention_days after it left): decided in the roster's own
transaction, so neither two assistants starting together nor an assistant that went
quiet for a moment can end up sharing it. Replicas of one assistant share it: the
member leaves when the last of them stops. A row of another shape breaks no reader."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import sqlalchemy as sa

from core.errors import ConfigError
from core.group.config import GroupConfig
from core.group.identity import CapabilitySources
from core.group.roster import Roster, Snapshot
from core.group.service import GroupService
from core.group.tables import group_members
from core.store.config import StoreConfig
from core.store.engine import Store
from gateway.commands.doctor_group import group_checks
from gateway.config import load_config
from tests.integration.schema_stores import schema_stores

pytestmark = pytest.mark.postgres


@pytest.fixture
async def stores(pg_url: str) -> AsyncIterator[dict[str, Store]]:
    async with schema_stores(pg_url, migrate=False) as opened:
        yield opened


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
    await home.leave("same")  # home stopped: the name is still home's
    with pytest.raises(ConfigError, match=r"belongs to another assistant .*group forget same"):
        await work.announce(_snapshot("work"), starting=True)
    assert await work.forget("same") == "forgotten"  # an operator frees it
    assert await work.announce(_snapshot("work"), starting=True) == "group.joined"
    assert await home.forget("same") == "active"  # an active member is never forgotten
    # a heartbeat of the old holder (a process left running) must not take it back
    with pytest.raises(ConfigError, match="taken by an active member of another assistant"):
        await home.announce(_snapshot("home"))
    assert await _schema_of_row(stores["home"]) == "work"
    await work.leave("same")
    assert await home.forget("same") == "forgotten"
    assert await home.forget("same") == "missing"
    assert await home.announce(_snapshot("home"), starting=True) == "group.joined"
    assert await _schema_of_row(stores["home"]) == "home"


def _service(store: Store, url: str, workspace: Path) -> GroupService:
    return GroupService(
        store=store,
        url=url,
        config=GroupConfig(enabled=True, name="home", heartbeat=30, expire_after=60),
        name="home",
        workspace=workspace,
        sources=CapabilitySources(tools=lambda: ["read_file"]),
    )


async def test_one_replica_stopping_leaves_the_member_active_while_another_runs(
    pg_url: str, tmp_path: Path
) -> None:
    replicas = [Store(url=pg_url, config=StoreConfig(schema="home")) for _ in range(2)]
    for store in replicas:
        await store.open(migrate=False)
    try:
        first, second = (_service(store, pg_url, tmp_path) for store in replicas)
        await first.start(version="1")
        await second.start(version="1")
        await first.stop()  # a rolling restart: the other gateway still answers
        member = await second.roster.member("home")
        assert member is not None and member.state == "active"
        await second.stop()  # the last one: the member has left
        member = await second.roster.member("home")
        assert member is not None and member.state == "left"
        kinds = [e.kind for e in await second.timeline.recent()]
        assert kinds == ["group.joined", "group.joined", "group.left"]
    finally:
        for store in replicas:
            await store.close()


async def test_doctor_says_when_the_name_is_another_assistants(
    stores: dict[str, Store], pg_url: str, tmp_path: Path
) -> None:
    (tmp_path / "config.toml").write_text(
        f'[store]\nurl = "{pg_url}"\nschema = "work"\n\n[group]\nenabled = true\nname = "same"\n'
    )
    roster = Roster(stores["home"], expire_after=60)
    await roster.ensure_tables()
    await roster.announce(_snapshot("home"), starting=True)
    (check,) = await group_checks(tmp_path, load_config(tmp_path))
    assert not check.ok
    assert "the roster's same is another assistant's (store.schema home" in check.reason
    await roster.leave("same")
    (check,) = await group_checks(tmp_path, load_config(tmp_path))
    assert not check.ok  # still home's: it stays with its assistant until forgotten
    assert "`familiar group forget same` frees it" in check.reason
    assert await roster.forget("same") == "forgotten"
    (check,) = await group_checks(tmp_path, load_config(tmp_path))
    assert check.ok and check.warn  # free: this one takes it when it starts


async def test_a_malformed_row_does_not_break_the_roster(stores: dict[str, Store]) -> None:
    roster = Roster(stores["home"], expire_after=60)
    await roster.ensure_tables()
    await roster.announce(_snapshot("home"), starting=True)
    for odd in ({"tools": 5, "skills": ["greeter"]}, ["tools"], None):
        async with stores["home"].engine.begin() as conn:
            await conn.execute(sa.update(group_members).values(capabilities=odd))
        (member,) = await roster.members()
        expected = {"skills": ["greeter"]} if isinstance(odd, dict) else {}
        assert member.capabilities == expected
