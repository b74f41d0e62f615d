"""Group mode rig: gateways on separate homes, one PostgreSQL database, own schemas.

Each test gets a fresh database (so concurrent test runs never share the group's
``familiar_group`` schema); each member has its own ``store.schema`` in it.
"""

from __future__ import annotations

import shutil
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.exc import DBAPIError

from core.group.roster import Member, Roster
from core.group.timeline import Timeline, TimelineEntry
from core.store.engine import Store
from tests.conftest import fresh_pg_database
from tests.daemon_env import daemon_env
from tests.e2e.test_daemon_process import Daemon
from tests.waiting import eventually

__all__ = ["GroupDb", "group_db", "homes", "member", "write_member_config"]

HEARTBEAT = 0.3
EXPIRE_AFTER = 3.0
"""Seconds: long enough that a loaded machine never stalls a live member past it."""


@pytest.fixture
def homes() -> Iterator[list[Path]]:
    """Three empty homes (a test uses as many as it needs)."""
    paths = [Path(tempfile.mkdtemp(prefix="fam-group-", dir="/tmp")) for _ in range(3)]
    try:
        yield paths
    finally:
        for path in paths:
            shutil.rmtree(path, ignore_errors=True)


class GroupDb:
    """The test's database, read from the test's side (not through a member)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.run = uuid.uuid4().hex[:6]
        self.store = Store(url=url)

    def schema(self, name: str) -> str:
        return f"g{self.run}_{name.replace('-', '_')}"

    async def members(self) -> dict[str, Member]:
        roster = Roster(self.store, expire_after=EXPIRE_AFTER)
        return {m.name: m for m in await roster.members()}

    async def timeline(self) -> list[TimelineEntry]:
        return await Timeline(self.store).recent(1000)

    async def until_members(self, expected: dict[str, str], what: str) -> dict[str, Member]:
        """Wait until every named member has the expected state; the roster then."""

        found: dict[str, Member] = {}

        async def check() -> bool:
            try:
                got = await self.members()
            except DBAPIError:  # the first member has not created the tables yet
                return False
            found.update(got)
            return all(n in got and got[n].state == s for n, s in expected.items())

        await eventually(check, what=what, timeout=30)
        return found

    async def rows(self, query: str) -> list[tuple[Any, ...]]:
        async with self.store.read() as conn:
            return [tuple(r) for r in (await conn.execute(sa.text(query))).all()]


@pytest.fixture
async def group_db() -> AsyncIterator[GroupDb]:
    async with fresh_pg_database() as url:
        db = GroupDb(url)
        await db.store.open(migrate=False)
        try:
            yield db
        finally:
            await db.store.close()


def write_member_config(
    home: Path, *, llm: str, db: GroupDb, name: str, extra: str = "", **group: Any
) -> None:
    """A config for member ``name``: its own schema, a short heartbeat."""
    settings = {"heartbeat": HEARTBEAT, "expire_after": EXPIRE_AFTER, **group}
    lines = "".join(f"{key} = {_toml(value)}\n" for key, value in settings.items())
    (home / "config.toml").write_text(
        f'[provider]\nkind = "openai"\nbase_url = "{llm}"\nmodel = "fake-model"\n'
        f'api_key = "sk-test"\n\n[http]\nport = 0\n\n'
        f'[store]\nurl = "{db.url}"\nschema = "{db.schema(name)}"\n\n'
        f'[group]\nenabled = true\nname = "{name}"\ndescription = "the {name} assistant"\n'
        f"{lines}{extra}"
    )


def _toml(value: Any) -> str:
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@asynccontextmanager
async def member(home: Path) -> AsyncIterator[Daemon]:
    """One spawned one-process gateway on ``home`` (killed if the test did not stop it)."""
    d = Daemon(home, daemon_env(single=True))
    await d.start()
    try:
        yield d
    finally:
        await d.kill()
