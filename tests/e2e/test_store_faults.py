"""The supervised gateway when the host is unwell: a full disk, a store that is corrupted,
deleted, unreachable or dropped. What an operator sees: refusals, readiness, exit codes.

Every test spawns ``python -m gateway.daemon --home H`` in the default multi-process mode
(the supervisor and its roles), with the scripted provider (it answers ``echo: <text>``).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import sqlite3
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
import pytest

from tests.conftest import PG_ADMIN_DB, PG_HOST, PG_PORT, PG_USER, fresh_pg_database
from tests.daemon_env import REPO, daemon_env
from tests.e2e.test_processes import BASE, Gateway, running
from tests.small_disk import fill, small_disk
from tests.waiting import eventually

pytestmark = pytest.mark.slow

TOKEN = "ops-token-for-the-fault-tests"
EXIT_WITHIN = 30.0
"""Seconds a supervisor may take to stop every role and exit once its store is lost
(detection takes about 2 s; the rest is a loaded 2-core machine stopping processes)."""


def write_config(home: Path, *, store_url: str | None = None) -> None:
    store = f'[store]\nurl = "{store_url}"\n\n' if store_url else ""
    (home / "config.toml").write_text(
        f'{store}[provider]\nkind = "scripted"\n\n[http]\nport = 0\n\n'
        "[channels.webhook]\nenabled = true\n\n"
        f'[channels.webhook.hooks.ops]\ntoken = "{TOKEN}"\nrate = 1000\n\n'
        '[gateway]\nprocesses = "multi"\nagent_workers = 1\nrestart_backoff_max = 2\n'
    )
    os.chmod(home / "config.toml", 0o600)


@pytest.fixture
def home() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="fam-", dir="/tmp"))
    try:
        write_config(path)
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _replies(home: Path, message_id: str) -> int:
    uri = f"file:{home / 'familiar.db'}?mode=ro"
    with sqlite3.connect(uri, uri=True, timeout=30) as db:
        rows = db.execute("SELECT count(*) FROM outbound WHERE inbound_id=?", (message_id,))
        return int(rows.fetchone()[0])


async def _post(g: Gateway, path: str, body: dict[str, Any]) -> tuple[int, Any, float]:
    """POST on the control socket: status, JSON body (or the raw text), seconds taken."""
    started = time.monotonic()
    async with g._session() as http, http.post(BASE + path, json=body) as response:
        raw = await response.text()
    try:
        parsed: Any = json.loads(raw.splitlines()[0]) if raw else None
    except ValueError:
        parsed = raw
    return response.status, parsed, time.monotonic() - started


async def _http(url: str, *, post: dict[str, Any] | None = None) -> tuple[int, Any]:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with aiohttp.ClientSession() as http:
        request = http.post(url, json=post, headers=headers) if post else http.get(url)
        async with request as response:
            return response.status, await response.json(content_type=None)


async def _familiar(home: Path, *args: str) -> tuple[int, str, str, float]:
    started = time.monotonic()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "gateway.cli", *args, "--home", str(home),
        cwd=REPO, env=daemon_env(), stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode(), time.monotonic() - started


async def test_a_full_disk_refuses_new_messages_at_once_and_recovers_by_itself() -> None:
    with small_disk(16) as disk:
        home = disk / "home"
        home.mkdir()
        write_config(home)
        async with running(home) as g:
            await g.wait_ready()
            http = f"http://{(await g.get('/v1/status'))['http']}"
            before = [await g.submit(f"cli:s{i}", f"before {i}") for i in range(5)]
            await eventually(lambda: all(_replies(home, m) for m in before), timeout=60)

            filler = await asyncio.to_thread(fill, disk)

            async def not_ready() -> bool:
                status, body = await _http(f"{http}/readyz")
                return status == 503 and "no space left" in json.dumps(body)

            await eventually(not_ready, timeout=15, what="/readyz 503 naming the full disk")
            status, body, took = await _post(
                g, "/v1/messages", {"session": "cli:x", "text": "during", "timeout": 5}
            )
            assert status == 507 and "no space left for the database" in body["error"], body
            assert str(home / "familiar.db") in body["error"] and took < 5
            code, out, err, took = await _familiar(home, "send", "--timeout", "10", "during")
            assert code == 1 and out == "", (code, out, err)
            assert len(err.strip().splitlines()) == 1 and "no space left" in err, err
            assert took < 15
            status, body = await _http(f"{http}/webhook/ops", post={"text": "during"})
            assert status == 507 and "no space left" in body["error"], body
            code, out, _, _ = await _familiar(home, "status")
            assert "no space left" in out, out
            code, out, _, _ = await _familiar(home, "doctor")
            assert code != 0 and "store disk space: 0.0 MiB free" in out, out
            assert "✗ store in the gateway: no space left for the database" in out, out

            filler.unlink()

            async def ready() -> bool:
                return (await _http(f"{http}/readyz"))[0] == 200

            await eventually(ready, timeout=15, what="/readyz 200 once there is room")
            code, out, err, _ = await _familiar(home, "send", "--timeout", "60", "after")
            assert (code, out.strip()) == (0, "echo: after"), (code, out, err)
            assert [_replies(home, m) for m in before] == [1] * len(before)
            assert g.alive
            assert g.all_running(), g.table()  # nothing was restarted


async def _exits(g: Gateway, within: float = EXIT_WITHIN) -> tuple[int, float]:
    assert g.proc is not None
    started = time.monotonic()
    try:
        code = await asyncio.wait_for(g.proc.wait(), within)
    except TimeoutError:
        raise AssertionError(f"the supervisor did not exit:\n{g.logs()[-4000:]}") from None
    return code, time.monotonic() - started


def _said(g: Gateway) -> list[str]:
    """The human lines (``familiar: ...``) among the structured log lines."""
    return [line for line in g.logs().splitlines() if line.startswith("familiar: ")]


def _no_restarts(g: Gateway) -> None:
    assert "restart in" not in g.logs(), g.logs()[-4000:]


async def _served(home: Path) -> None:
    """Run the gateway once, answer a message, stop it: a store with content."""
    async with running(home) as g:
        await g.wait_ready()
        message = await g.submit("cli:x", "hello")
        await eventually(lambda: _replies(home, message) == 1, timeout=60)
        assert await g.stop() == 0, g.logs()
    g.log.unlink()  # what the next run logs, alone


async def test_a_corrupted_store_at_start_stops_the_supervisor_with_exit_1(home: Path) -> None:
    await _served(home)
    db = home / "familiar.db"
    with db.open("r+b") as f:
        f.seek(db.stat().st_size // 2)
        f.write(os.urandom(8192))
    async with running(home) as g:
        code, _took = await _exits(g)
    assert code == 1, g.logs()[-4000:]
    said = _said(g)
    assert len(said) == 1, said
    assert said[0].startswith(f"familiar: cannot migrate the store: the database {db} is"), said
    assert "started role=" not in g.logs()  # no role ran on it
    _no_restarts(g)


async def test_a_deleted_store_stops_every_role_and_the_supervisor_exits_1(home: Path) -> None:
    async with running(home) as g:
        await g.wait_ready()
        pids = [p["pid"] for p in g.table().values()]
        (home / "familiar.db").unlink()
        code, took = await _exits(g)
    assert code == 1 and took < EXIT_WITHIN, g.logs()[-4000:]
    said = _said(g)
    assert said == [f"familiar: stopping: {home / 'familiar.db'} was deleted while open"], said
    assert not [pid for pid in pids if _alive(pid)]
    _no_restarts(g)


async def test_corruption_under_a_running_gateway_stops_it(home: Path) -> None:
    async with running(home) as g:
        await g.wait_ready()
        message = await g.submit("cli:x", "hello")
        await eventually(lambda: _replies(home, message) == 1, timeout=60)
        db = home / "familiar.db"
        with db.open("r+b") as f:  # the header and two pages
            f.write(os.urandom(100))
            for page in (2, 5):
                f.seek(4096 * page)
                f.write(os.urandom(4096))
        code, took = await _exits(g)
    assert code == 1 and took < EXIT_WITHIN, g.logs()[-4000:]
    said = _said(g)
    assert len(said) == 1 and str(db) in said[0], said
    assert "is not an SQLite database any more" in said[0] or "is corrupted" in said[0], said
    _no_restarts(g)


async def test_postgresql_unreachable_at_start_exits_1_naming_the_url(home: Path) -> None:
    with socket_port() as port:
        url = f"postgresql+asyncpg://familiar:secret-pw@127.0.0.1:{port}/familiar"
        write_config(home, store_url=url)
        async with running(home) as g:
            code, took = await _exits(g)
    assert code == 1 and took < EXIT_WITHIN, g.logs()[-4000:]
    said = _said(g)
    assert len(said) == 1, said
    assert said[0].startswith("familiar: cannot migrate the store:"), said
    assert "secret-pw" not in g.logs()
    _no_restarts(g)


@pytest.mark.postgres
async def test_a_dropped_postgresql_database_stops_the_gateway(home: Path) -> None:
    async with fresh_pg_database() as url:
        name = url.rsplit("/", 1)[1]
        write_config(home, store_url=url)
        async with running(home) as g:
            await g.wait_ready()
            code, out, err, _ = await _familiar(home, "send", "--timeout", "60", "hello")
            assert (code, out.strip()) == (0, "echo: hello"), (code, out, err)
            admin = await asyncpg.connect(
                host=PG_HOST, port=PG_PORT, user=PG_USER, database=PG_ADMIN_DB
            )
            try:
                await admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
                await admin.execute(f'CREATE DATABASE "{name}"')  # empty, same name
            finally:
                await admin.close()
            code, took = await _exits(g)
    assert code == 1 and took < EXIT_WITHIN, g.logs()[-4000:]
    said = _said(g)
    assert len(said) == 1 and name in said[0], said
    assert "does not exist" in said[0] or "lost its schema" in said[0], said
    assert "Server got itself in trouble" not in g.logs()
    _no_restarts(g)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@contextmanager
def socket_port() -> Iterator[int]:
    """A loopback port bound but not listening: a connection to it is refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield int(sock.getsockname()[1])
