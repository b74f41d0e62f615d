"""Group mode with real gateways: two and three members on one PostgreSQL database, each
with its own schema, see each other, their updates, leaves and expiries."""

from __future__ import annotations

import asyncio
import json
import signal
import time
from pathlib import Path

import pytest

from tests.e2e.group.rig import (
    EXPIRE_AFTER,
    HEARTBEAT,
    GroupDb,
    group_db,
    homes,
    member,
    write_member_config,
)
from tests.e2e.test_cli_e2e import familiar
from tests.fakes.fake_openai import FakeOpenAI
from tests.waiting import eventually

pytestmark = [pytest.mark.slow, pytest.mark.postgres]
__all__ = ["group_db", "homes"]  # the fixtures

BUILTIN_TOOLS = {"read_file", "exec", "sessions_spawn", "agents_list"}


async def _cli_json(home: Path, *args: str) -> dict[str, object]:
    result = await asyncio.to_thread(familiar, home, *args, "--json")
    assert result.returncode == 0, result.stderr
    parsed: dict[str, object] = json.loads(result.stdout)
    return parsed


async def test_two_members_see_each_other_and_keep_their_own_sessions(
    group_db: GroupDb, homes: list[Path]
) -> None:
    alpha_home, beta_home, _ = homes
    async with FakeOpenAI() as llm:
        write_member_config(alpha_home, llm=llm.base_url, db=group_db, name="alpha")
        write_member_config(beta_home, llm=llm.base_url, db=group_db, name="beta")
        async with member(alpha_home) as alpha, member(beta_home) as beta:
            await asyncio.gather(alpha.wait_ready(), beta.wait_ready())
            # A member announces itself before it is ready: no waiting needed.
            members = await group_db.members()
            for name in ("alpha", "beta"):
                assert members[name].state == "active"
                assert members[name].description == f"the {name} assistant"
                assert members[name].store_schema == group_db.schema(name)
                assert set(members[name].capabilities["tools"]) >= BUILTIN_TOOLS
                assert "general-purpose" in members[name].capabilities["agents"]
                assert members[name].capabilities["channels"] == ["cli", "ui"]
                assert "IDENTITY.md" in members[name].identity
            # beta's CLI shows alpha, as the shared store holds it (the CLI and doctor on
            # every home: tests/integration/test_group_store.py).
            seen = await _cli_json(beta_home, "group", "roster")
            listed = {m["name"]: m for m in seen["members"]}  # type: ignore[attr-defined]
            assert {n: m["state"] for n, m in listed.items()} == {
                "alpha": "active",
                "beta": "active",
            }
            assert set(listed["alpha"]["capabilities"]["tools"]) >= BUILTIN_TOOLS

            # Different schemas are different assistants: alpha's conversation is not beta's.
            message = await alpha.submit("cli:private", "hello alpha")
            await eventually(
                lambda: _answered(group_db, "alpha", message), what="alpha answered", timeout=30
            )
            assert await _count(group_db, "alpha", "sessions", "key = 'cli:private'") == 1
            assert await _count(group_db, "beta", "sessions", "key = 'cli:private'") == 0
            assert await _count(group_db, "beta", "inbound", f"id = '{message}'") == 0
            assert await _count(group_db, "beta", "history", "true") == 0

            beta.signal(signal.SIGTERM)
            assert await beta.wait() == 0, beta.logs()
            members = await group_db.members()  # recorded before beta exited
            assert (members["alpha"].state, members["beta"].state) == ("active", "left")
            status = await alpha.get("/v1/status")  # what `familiar status` shows
            group = status["group"]
            assert isinstance(group, dict)
            assert group["name"] == "alpha" and group["joined"] is True
            assert {m["name"]: m["state"] for m in group["members"]} == {
                "alpha": "active",
                "beta": "left",
            }
            alpha.signal(signal.SIGTERM)
            assert await alpha.wait() == 0, alpha.logs()
    kinds = [(e.member, e.kind) for e in await group_db.timeline()]
    assert sorted(kinds[:2]) == [("alpha", "group.joined"), ("beta", "group.joined")]
    assert kinds[2:] == [("beta", "group.left"), ("alpha", "group.left")]


async def _answered(db: GroupDb, name: str, message: str) -> bool:
    return await _count(db, name, "outbound", f"inbound_id = '{message}'") > 0


async def _count(db: GroupDb, name: str, table: str, where: str) -> int:
    rows = await db.rows(f'SELECT count(*) FROM "{db.schema(name)}".{table} WHERE {where}')
    return int(rows[0][0])


async def test_three_members_updates_leave_and_expiry_in_order(
    group_db: GroupDb, homes: list[Path]
) -> None:
    names = ("alpha", "beta", "gamma")
    async with FakeOpenAI() as llm:
        for home, name in zip(homes, names, strict=True):
            write_member_config(home, llm=llm.base_url, db=group_db, name=name)
        async with member(homes[0]) as alpha, member(homes[1]) as _beta, member(homes[2]) as gamma:
            await asyncio.gather(alpha.wait_ready(), _beta.wait_ready(), gamma.wait_ready())
            members = await group_db.members()
            assert {n: members[n].state for n in names} == dict.fromkeys(names, "active")

            # A reload: beta's workspace gains a skill; its next heartbeat announces it.
            skill = homes[1] / "workspace" / "skills" / "greeter" / "SKILL.md"
            skill.parent.mkdir(parents=True)
            skill.write_text("---\nname: greeter\ndescription: Greets people.\n---\nSay hi.\n")
            added = time.monotonic()
            await eventually(
                lambda: _has_skill(group_db, "beta", "greeter"), what="beta shares greeter"
            )
            # the skill catalog looks at its files at most once a second, then one beat
            assert time.monotonic() - added < 1.0 + 3 * HEARTBEAT + 1.0

            alpha.signal(signal.SIGTERM)
            assert await alpha.wait() == 0, alpha.logs()
            assert (await group_db.members())["alpha"].state == "left"

            await gamma.kill()
            killed = time.monotonic()
            assert (await group_db.members())["gamma"].state == "active"  # not yet expired
            await group_db.until_members({"gamma": "gone"}, "gamma gone after expire_after")
            assert time.monotonic() - killed > EXPIRE_AFTER - 2 * HEARTBEAT
            await eventually(
                lambda: _kinds(group_db, "gamma", "group.expired"),
                what="a peer recorded gamma's expiry",
            )
    timeline = [(e.member, e.kind) for e in await group_db.timeline()]
    assert sorted(timeline[:3]) == [(n, "group.joined") for n in names]
    assert timeline[3:6] == [
        ("beta", "group.updated"),
        ("alpha", "group.left"),
        ("gamma", "group.expired"),
    ], timeline
    update = next(e for e in await group_db.timeline() if e.kind == "group.updated")
    assert update.detail["skills"] == {"added": ["greeter"], "removed": []}


async def _has_skill(db: GroupDb, name: str, skill: str) -> bool:
    return skill in (await db.members())[name].capabilities.get("skills", [])


async def _kinds(db: GroupDb, name: str, kind: str) -> bool:
    return any(e.member == name and e.kind == kind for e in await db.timeline())


async def test_sqlite_with_group_enabled_exits_78_naming_the_reason(homes: list[Path]) -> None:
    # (store.schema with SQLite is refused the same way: tests/unit/test_group_config.py)
    (homes[0] / "config.toml").write_text("[group]\nenabled = true\n")
    result = await asyncio.to_thread(familiar, homes[0], "gateway")
    assert result.returncode == 78, result.stderr
    assert "group.enabled: group mode needs a store that several gateways share" in result.stderr
    assert not (homes[0] / "familiar.db").exists()
