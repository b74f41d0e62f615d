"""Group mode on a real PostgreSQL: schemas keep assistants apart; the shared roster,
timeline and wake-ups; the CLI and doctor reading them."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest
import sqlalchemy as sa
from click.testing import CliRunner

from core.errors import ConfigError
from core.group.config import GroupConfig
from core.group.identity import CapabilitySources
from core.group.roster import Roster, Snapshot
from core.group.service import CHANGE_CHECK, GroupService
from core.group.signals import GroupSignals
from core.group.timeline import Timeline
from core.sessions import SessionStore
from core.store.config import StoreConfig
from core.store.engine import Store
from core.store.migrate import current_revision, head_revision
from gateway.cli import app
from gateway.commands.doctor_group import group_checks
from gateway.config import load_config
from tests.integration.schema_stores import schema_stores
from tests.waiting import eventually, started

pytestmark = pytest.mark.postgres


@pytest.fixture
async def stores(pg_url: str) -> AsyncIterator[dict[str, Store]]:
    """Two assistants' stores; not migrated: the group's tables are not theirs."""
    async with schema_stores(pg_url, migrate=False) as opened:
        yield opened


async def test_each_schema_is_its_own_assistant_with_its_own_migrations(pg_url: str) -> None:
    stores = {"public": Store(url=pg_url)}
    stores |= {n: Store(url=pg_url, config=StoreConfig(schema=n)) for n in ("home", "work")}
    try:
        for store in stores.values():
            await store.open()
        await SessionStore(store=stores["home"]).new_epoch("cli:only-home", "cli")
        counts = {name: await SessionStore(store=s).count() for name, s in stores.items()}
        assert counts == {"public": 0, "home": 1, "work": 0}
        for name, store in stores.items():
            schema = None if name == "public" else name
            async with store.engine.connect() as conn:
                assert await conn.run_sync(current_revision, schema) == head_revision()
            health = await store.health.check()
            assert health.ok, health.detail
    finally:
        for store in stores.values():
            await store.close()


async def test_a_new_schema_is_migrated_even_when_public_is_at_head(pg_url: str) -> None:
    # public's version table is on the search path too: it must not be taken for the
    # new schema's (which would leave the schema without tables).
    public = Store(url=pg_url)
    await public.open()
    await public.close()
    fresh = Store(url=pg_url, config=StoreConfig(schema="late"))
    await fresh.open()
    try:
        async with fresh.read() as conn:
            tables = await conn.execute(
                sa.text(
                    "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'late'"
                )
            )
        assert tables.scalar_one() > 10
    finally:
        await fresh.close()


def _snapshot(name: str, **changes: object) -> Snapshot:
    base = Snapshot(
        name=name,
        description=f"the {name} one",
        identity="# IDENTITY",
        version="1.0",
        capabilities={"tools": ["read_file"], "skills": []},
        host="h1",
        store_schema=name,
        started_at=datetime.now(UTC),
    )
    return replace(base, **changes)  # type: ignore[arg-type]


async def _backdate(store: Store, table: str, column: str, where: str) -> None:
    async with store.engine.begin() as conn:
        await conn.execute(
            sa.text(
                f"UPDATE familiar_group.{table} SET {column} = {column} - interval '1 day' "
                f"WHERE {where}"
            )
        )


async def test_roster_joins_updates_leaves_and_one_expiry_per_silence(
    stores: dict[str, Store],
) -> None:
    home = Roster(stores["home"], expire_after=5)
    work = Roster(stores["work"], expire_after=5)
    await home.ensure_tables()
    await work.ensure_tables()  # idempotent
    assert await home.announce(_snapshot("home"), starting=True) == "group.joined"
    assert await work.announce(_snapshot("work"), starting=True) == "group.joined"
    assert await home.announce(_snapshot("home")) is None  # a plain heartbeat
    added = {"tools": ["read_file", "exec"], "skills": ["greeter"]}
    assert await home.announce(_snapshot("home", capabilities=added)) == "group.updated"
    seen = await work.member("home")
    assert seen is not None and seen.state == "active"
    assert seen.capabilities == added

    await _backdate(stores["home"], "group_members", "last_heartbeat", "name = 'work'")
    assert (await home.member("work")).state == "gone"  # type: ignore[union-attr]
    noticed = await asyncio.gather(home.expire_stale(), work.expire_stale())
    assert sorted(noticed) == [[], ["work"]]  # recorded once, by whoever came first
    assert await work.announce(_snapshot("work")) == "group.joined"  # back again

    assert await home.leave("home") is True
    assert await home.leave("home") is False
    assert [m.state for m in await work.members()] == ["left", "active"]

    entries = await Timeline(stores["work"]).recent()
    assert [(e.member, e.kind) for e in entries] == [
        ("home", "group.joined"),
        ("work", "group.joined"),
        ("home", "group.updated"),
        ("work", "group.expired"),
        ("work", "group.joined"),
        ("home", "group.left"),
    ]
    assert entries[2].detail == {
        "tools": {"added": ["exec"], "removed": []},
        "skills": {"added": ["greeter"], "removed": []},
    }
    assert [e.member for e in await Timeline(stores["work"]).recent(2)] == ["work", "home"]

    await _backdate(stores["home"], "group_timeline", "at", "kind = 'group.joined'")
    assert await Timeline(stores["home"]).prune(retention_days=0.5) == 3
    assert len(await Timeline(stores["home"]).recent()) == 3

    # A member gone longer than the retention is forgotten; a recent leaver is kept.
    await _backdate(stores["home"], "group_members", "last_heartbeat", "name = 'home'")
    assert await work.forget_departed(retention_days=0.5) == ["home"]
    assert await work.forget_departed(retention_days=0.5) == []
    assert [m.name for m in await work.members()] == ["work"]
    await work.leave("work")
    assert await work.forget_departed(retention_days=0.5) == []


async def test_signals_reach_the_others_not_the_sender_nor_other_targets(pg_url: str) -> None:
    a, b, c = (GroupSignals(pg_url, name) for name in ("a", "b", "c"))
    got: dict[str, list[str]] = {"a": [], "b": [], "c": []}
    for name, signals in (("a", a), ("b", b), ("c", c)):
        signals.on(lambda note, name=name: got[name].append(note["kind"]))
        await signals.start()
    try:
        assert await a.notify("group.joined", member="a")
        assert await a.notify("group.task", to="c", task="t1")
        await eventually(lambda: got["c"] == ["group.joined", "group.task"], what="c got both")
        await eventually(lambda: got["b"] == ["group.joined"], what="b got the broadcast")
        assert got["a"] == []
        assert got["b"] == ["group.joined"]  # not c's task
    finally:
        for signals in (a, b, c):
            await signals.stop()


def _service(store: Store, url: str, name: str, tmp_path: Path) -> GroupService:
    return GroupService(
        store=store,
        url=url,
        config=GroupConfig(enabled=True, name=name, heartbeat=30, expire_after=60),
        name=name,
        workspace=tmp_path,
        sources=CapabilitySources(tools=lambda: ["read_file"]),
    )


async def test_a_name_active_in_another_schema_is_refused(
    stores: dict[str, Store], pg_url: str, tmp_path: Path
) -> None:
    first = _service(stores["home"], pg_url, "same", tmp_path)
    await first.start(version="1", channels=["cli"])
    try:
        with pytest.raises(ConfigError, match="taken by an active member"):
            await _service(stores["work"], pg_url, "same", tmp_path).start(version="1")
        replica = _service(stores["home"], pg_url, "same", tmp_path)  # same assistant
        await replica.start(version="1")
        await replica.stop()
    finally:
        await first.stop()
    report = await first.report()
    assert report["joined"] is False
    assert report["members"] == [
        {"name": "same", "state": "left", "host": report["members"][0]["host"]}
    ]


def _home(tmp_path: Path, pg_url: str, name: str) -> Path:
    home = tmp_path / name
    home.mkdir()
    (home / "config.toml").write_text(
        f'[store]\nurl = "{pg_url}"\nschema = "{name}"\n\n'
        f'[group]\nenabled = true\nname = "{name}"\n'
    )
    return home


async def test_cli_and_doctor_read_the_roster_without_a_gateway(
    stores: dict[str, Store], pg_url: str, tmp_path: Path
) -> None:
    home = _home(tmp_path, pg_url, "home")
    runner = CliRunner()
    empty = await asyncio.to_thread(runner.invoke, app, ["group", "roster", "--home", str(home)])
    assert empty.exit_code == 0, empty.output
    assert "no member has joined the group yet" in empty.output
    config = load_config(home)
    assert [c.warn for c in await group_checks(home, config)] == [True]  # not joined yet

    roster = Roster(stores["home"], expire_after=60)
    await roster.ensure_tables()
    await roster.announce(_snapshot("home"), starting=True)
    await Roster(stores["work"], expire_after=60).announce(_snapshot("work"), starting=True)
    listed = await asyncio.to_thread(
        runner.invoke, app, ["group", "roster", "--json", "--home", str(home)]
    )
    members = json.loads(listed.output)["members"]
    assert [(m["name"], m["state"], m["store_schema"]) for m in members] == [
        ("home", "active", "home"),
        ("work", "active", "work"),
    ]
    assert members[0]["capabilities"] == {"tools": ["read_file"], "skills": []}
    table = await asyncio.to_thread(runner.invoke, app, ["group", "timeline", "--home", str(home)])
    assert "group.joined" in table.output and "the work one" in table.output
    limited = await asyncio.to_thread(
        runner.invoke, app, ["group", "timeline", "--limit", "1", "--json", "--home", str(home)]
    )
    assert [e["member"] for e in json.loads(limited.output)["entries"]] == ["work"]
    (check,) = await group_checks(home, config)
    assert check.ok and not check.warn
    assert "home active" in check.reason and "peers: work active" in check.reason

    async def forget(name: str) -> tuple[int, str]:
        args = ["group", "forget", name, "--home", str(home)]
        result = await asyncio.to_thread(runner.invoke, app, args)
        return result.exit_code, result.output

    code, said = await forget("work")
    assert code == 1 and "work is active" in said
    await Roster(stores["work"], expire_after=60).leave("work")
    assert await forget("work") == (0, "forgot work: another assistant may take the name now\n")
    code, said = await forget("work")
    assert code == 1 and "no member 'work'" in said
    names = [m.name for m in await roster.members()]
    assert names == ["home"]
    table = await asyncio.to_thread(runner.invoke, app, ["group", "timeline", "--home", str(home)])
    assert "group.forgotten" in table.output and "by `familiar group forget`" in table.output


async def test_the_cli_refuses_a_sqlite_home(tmp_path: Path) -> None:
    result = await asyncio.to_thread(
        CliRunner().invoke, app, ["group", "roster", "--home", str(tmp_path)]
    )
    assert result.exit_code == 1
    assert "needs a PostgreSQL store" in result.output


async def test_a_member_is_woken_when_a_peer_joins_and_leaves(
    stores: dict[str, Store], pg_url: str, tmp_path: Path
) -> None:
    home = _service(stores["home"], pg_url, "home", tmp_path)
    work = _service(stores["work"], pg_url, "work", tmp_path)
    await home.start(version="1")
    try:
        joined = await started(home.wait_change(timeout=30))  # waiting before work starts
        await work.start(version="1")
        assert await joined
        left = await started(home.wait_change(timeout=30))
        await work.stop()
        assert await left
    finally:
        await work.stop()
        await home.stop()
    kinds = [(e.member, e.kind) for e in await home.timeline.recent()]
    assert kinds == [
        ("home", "group.joined"),
        ("work", "group.joined"),
        ("work", "group.left"),
        ("home", "group.left"),
    ]


async def test_a_reload_is_announced_before_the_next_heartbeat(
    stores: dict[str, Store], pg_url: str, tmp_path: Path
) -> None:
    tools = ["read_file"]
    service = GroupService(
        store=stores["home"],
        url=pg_url,
        config=GroupConfig(enabled=True, name="home", heartbeat=600, expire_after=1200),
        name="home",
        workspace=tmp_path,
        sources=CapabilitySources(tools=lambda: tools),
    )
    await service.start(version="1")
    try:
        tools.append("mcp__calendar__add")  # as an MCP server's reload registers it

        async def announced() -> bool:
            found = await service.roster.member("home")
            return found is not None and "mcp__calendar__add" in found.capabilities["tools"]

        await eventually(announced, timeout=CHANGE_CHECK * 5, what="the new tool announced")
    finally:
        await service.stop()
    kinds = [e.kind for e in await service.timeline.recent()]
    assert kinds == ["group.joined", "group.updated", "group.left"]


async def test_replicas_announcing_together_make_one_row(pg_url: str) -> None:
    replicas = [Store(url=pg_url, config=StoreConfig(schema="home")) for _ in range(3)]
    for store in replicas:
        await store.open(migrate=False)
    try:
        rosters = [Roster(store, expire_after=60) for store in replicas]
        await rosters[0].ensure_tables()
        kinds = await asyncio.gather(
            *(r.announce(_snapshot("home"), starting=True) for r in rosters)
        )
        assert kinds == ["group.joined"] * 3  # each replica's start is told
        assert [m.name for m in await rosters[0].members()] == ["home"]
    finally:
        for store in replicas:
            await store.close()
