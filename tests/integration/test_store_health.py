"""The store notices: private files, one-line start failures, a lost file stops the gateway."""

from __future__ import annotations

import asyncio
import os
import shutil
import sqlite3
import stat
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from click.testing import CliRunner

from core.store.engine import Store
from gateway.cli import app
from gateway.daemon import serve
from tests.integration.test_daemon import BASE, _closed_port_url, running
from tests.integration.test_daemon import write_config as _write_config
from tests.waiting import eventually

REPO = Path(__file__).resolve().parents[2]
SCRIPTED = '\n[provider]\nkind = "scripted"\n'


@pytest.fixture
def home(daemon_home: Path) -> Path:
    return daemon_home


@pytest.fixture(autouse=True)
def _restore_logging(restore_root_logging: None) -> None:
    """Tests here run the daemon in-process."""


@pytest.fixture
def umask_0022() -> Iterator[None]:
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def write_config(home: Path, fake: None, extra: str = "") -> None:
    _write_config(home, fake, extra)
    os.chmod(home / "config.toml", 0o600)  # else the gateway logs that it tightened it


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


async def _serve_once(home: Path) -> int:
    return await asyncio.wait_for(
        serve(home, stop=asyncio.Event(), env={}, ollama_url=_closed_port_url()), 30
    )


async def _make_db_with_rows(home: Path) -> Path:
    async with running(home) as gw:
        for n in range(3):
            lines = await gw.send(f"hello {n}", session=f"cli:s{n}", stream=False)
            assert lines[-1]["type"] == "reply"
    return home / "familiar.db"


def _one_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


# -- private by default ---------------------------------------------------------------------


async def test_home_and_database_are_private_under_umask_0022(umask_0022: None) -> None:
    base = Path(tempfile.mkdtemp(prefix="fam-", dir="/tmp"))
    home = base / "h"  # created by the gateway itself
    try:
        async with running(home, overrides={"http": {"port": 0}}) as gw:
            await gw.send("write something", stream=False)
            db = home / "familiar.db"
            # While the gateway runs, SQLite's WAL and shared-memory files exist too.
            files = [db, db.with_name("familiar.db-wal"), db.with_name("familiar.db-shm")]
            assert {f.name: mode(f) for f in files} == {f.name: 0o600 for f in files}
            folders = [home, home / "run", home / "workspace"]
            assert {str(f): mode(f) for f in folders} == {str(f): 0o700 for f in folders}
            assert mode(home / "config.toml") == 0o600
    finally:
        shutil.rmtree(base, ignore_errors=True)


async def test_loose_modes_are_tightened_at_start_one_line_each(
    home: Path, umask_0022: None, capfd: pytest.CaptureFixture[str]
) -> None:
    write_config(home, None, SCRIPTED)
    db = await _make_db_with_rows(home)
    for path, loose in [(home, 0o755), (home / "workspace", 0o755), (db, 0o644)]:
        os.chmod(path, loose)
    capfd.readouterr()
    async with running(home) as gw:
        await gw.send("still here?", stream=False)
        assert mode(db) == 0o600
        assert mode(db.with_name("familiar.db-wal")) == 0o600
    assert mode(home) == 0o700 and mode(home / "workspace") == 0o700
    tightened = [line for line in capfd.readouterr().err.splitlines() if "tightened" in line]
    assert len(tightened) == 3, tightened
    assert any(f"{db} from 0644 to 0600" in line for line in tightened)


# -- one clear line for every store failure at start ---------------------------------------


def _corrupt_pages(db: Path) -> None:
    size = db.stat().st_size
    with db.open("r+b") as f:
        f.seek(size // 2)
        f.write(os.urandom(8192))


def _random_bytes(db: Path) -> None:
    db.write_bytes(os.urandom(64 * 1024))


@pytest.mark.parametrize(
    ("damage", "cause"),
    [(_corrupt_pages, "is corrupted"), (_random_bytes, "is not an SQLite database")],
)
async def test_damaged_database_fails_start_with_one_line(
    home: Path, capfd: pytest.CaptureFixture[str], damage: Any, cause: str
) -> None:
    write_config(home, None, SCRIPTED)
    db = await _make_db_with_rows(home)
    damage(db)
    capfd.readouterr()
    assert await _serve_once(home) == 1
    line = _one_line(capfd.readouterr().err)
    assert str(db) in line and cause in line, line
    assert "restore it from a backup" in line and "familiar doctor" in line


async def test_unusable_database_paths_fail_start_with_one_line(
    home: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    write_config(home, None, SCRIPTED)
    (home / "familiar.db").mkdir()
    assert await _serve_once(home) == 1
    line = _one_line(capfd.readouterr().err)
    assert f"{home / 'familiar.db'} is a directory" in line, line

    missing = home / "nowhere" / "x.db"
    (home / "config.toml").write_text(
        f'[http]\nport = 0\n[store]\nurl = "sqlite+aiosqlite:///{missing}"\n{SCRIPTED}'
    )
    assert await _serve_once(home) == 1
    line = _one_line(capfd.readouterr().err)
    assert f"{missing} cannot be created: its directory {missing.parent} does not exist" in line


async def test_a_directory_at_the_socket_path_fails_start_with_one_line(
    home: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    write_config(home, None, SCRIPTED)
    sock = home / "run" / "gateway.sock"
    sock.mkdir(parents=True)
    os.chmod(sock.parent, 0o700)
    assert await _serve_once(home) == 1
    line = _one_line(capfd.readouterr().err)
    assert f"{sock} is a directory, not the gateway's control socket" in line, line
    assert sock.is_dir()  # the user's directory is left alone


# -- a lost database stops the gateway -------------------------------------------------------


async def _readyz(address: str) -> tuple[int, dict[str, Any]]:
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"http://{address}/readyz") as response,
    ):
        return response.status, await response.json()


@pytest.mark.parametrize("how", ["deleted", "replaced"])
async def test_losing_the_database_fails_readyz_and_stops_the_gateway(
    home: Path, capfd: pytest.CaptureFixture[str], how: str
) -> None:
    write_config(home, None, SCRIPTED)
    stop = asyncio.Event()
    task = asyncio.create_task(serve(home, stop=stop, env={}, ollama_url=_closed_port_url()))
    connector = aiohttp.UnixConnector(path=str(home / "run" / "gateway.sock"))
    try:
        async with aiohttp.ClientSession(connector=connector) as control:
            async with asyncio.timeout(30):
                while True:
                    try:
                        async with control.get(BASE + "/v1/status") as response:
                            status = await response.json()
                        if status["http"]:  # HTTP listens last, after the control socket
                            break
                    except aiohttp.ClientConnectionError:
                        pass
                    await asyncio.sleep(0.05)
        assert status["store_health"]["ok"] is True, status
        address = status["http"]
        assert (await _readyz(address))[0] == 200
        db = home / "familiar.db"
        if how == "deleted":
            db.unlink()
        else:
            shutil.copy(db, home / "other.db")
            os.replace(home / "other.db", db)
        code, body = await _readyz(address)
        assert code == 503, body
        assert any(f"store: {db} was {how}" in reason for reason in body["reasons"]), body
        # The background check would have noticed within seconds as well; either way:
        assert await asyncio.wait_for(task, 30) == 1
    finally:
        stop.set()
        if not task.done():
            await asyncio.wait_for(task, 30)
    lost = [line for line in capfd.readouterr().err.splitlines() if "store lost" in line]
    assert len(lost) == 1, lost
    assert str(db) in lost[0] and "restore it from a backup" in lost[0]


async def test_background_check_notices_a_deleted_database_within_seconds(home: Path) -> None:
    write_config(home, None, SCRIPTED)
    stop = asyncio.Event()
    task = asyncio.create_task(serve(home, stop=stop, env={}, ollama_url=_closed_port_url()))
    connector = aiohttp.UnixConnector(path=str(home / "run" / "gateway.sock"))
    try:
        async with aiohttp.ClientSession(connector=connector) as control:

            async def serving() -> bool:  # started: the store is open and watched
                try:
                    async with control.get(BASE + "/v1/status") as response:
                        return bool((await response.json())["store_health"]["ok"])
                except aiohttp.ClientConnectionError:
                    return False

            await eventually(serving, timeout=30, what="the gateway serves")
        (home / "familiar.db").unlink()
        # Nobody asks /readyz: the periodic check alone must stop the gateway.
        assert await asyncio.wait_for(task, 10) == 1
        # Connections made on the way out never create an empty database in its place.
        assert not (home / "familiar.db").exists()
    finally:
        stop.set()
        if not task.done():
            await asyncio.wait_for(task, 30)


# -- doctor and backup -----------------------------------------------------------------------


def _cli(*args: str) -> Any:
    return CliRunner().invoke(app, list(args), catch_exceptions=False)


async def test_doctor_fails_on_a_corrupted_database(home: Path) -> None:
    write_config(home, None, SCRIPTED)
    db = await _make_db_with_rows(home)
    healthy = await asyncio.to_thread(_cli, "doctor", "--home", str(home))
    assert f"✓ store healthy: {db} passes quick_check" in healthy.output
    _corrupt_pages(db)
    result = await asyncio.to_thread(_cli, "doctor", "--home", str(home))
    assert result.exit_code != 0
    assert f"✗ store healthy: {db} is corrupted" in result.output, result.output


async def test_doctor_flags_a_missing_database_once_a_gateway_ran(home: Path) -> None:
    write_config(home, None, SCRIPTED)
    db = await _make_db_with_rows(home)
    db.unlink()
    result = await asyncio.to_thread(_cli, "doctor", "--home", str(home))
    assert result.exit_code != 0
    assert f"✗ store healthy: {db} is missing" in result.output, result.output


def _rows(db: Path) -> dict[str, list[tuple[Any, ...]]]:
    with sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True) as conn:
        return {
            table: sorted(conn.execute(f"SELECT * FROM {table}").fetchall(), key=repr)
            for table in ("sessions", "history", "inbound")
        }


async def _familiar(*args: str) -> tuple[int, str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FAMILIAR_")}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "gateway.cli", *args, cwd=REPO,
        env={**env, "PYTHONPATH": str(REPO)},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_backup_while_the_gateway_runs(home: Path, umask_0022: None) -> None:
    write_config(home, None, SCRIPTED)
    target = home / "copy.db"
    async with running(home) as gw:
        for n in range(5):
            await gw.send(f"message {n}", session=f"cli:b{n}", stream=False)
        code, out, err = await _familiar("backup", str(target), "--home", str(home))
        assert code == 0, err
        assert f"wrote {target}" in out
        assert "sessions 5" in out and "history 10" in out, out
        assert mode(target) == 0o600
        assert await asyncio.to_thread(_rows, target) == await asyncio.to_thread(
            _rows, home / "familiar.db"
        )
        code, _, err = await _familiar("backup", str(target), "--home", str(home))
        assert code == 1 and "exists: pass --force" in err
        code, _, err = await _familiar("backup", str(target), "--force", "--home", str(home))
        assert code == 0, err
    # The copy is a database the gateway can run on.
    other = home / "restored"
    other.mkdir()
    write_config(other, None, SCRIPTED)
    shutil.copy(target, other / "familiar.db")
    async with running(other) as gw:
        assert len((await gw.get("/v1/sessions"))["sessions"]) == 5


def test_backup_on_postgresql_prints_pg_dump_advice(home: Path) -> None:
    (home / "config.toml").write_text(
        '[store]\nurl = "postgresql+asyncpg://me:hunter2@db.example:5432/familiar"\n'
    )
    target = home / "dump"
    result = _cli("backup", str(target), "--home", str(home))
    assert result.exit_code == 0, result.output
    assert "pg_dump --format=custom" in result.output
    assert "postgresql://me:**********@db.example:5432/familiar" in result.output
    assert "hunter2" not in result.output
    assert not target.exists()


async def test_store_health_check_on_every_backend(store: Store) -> None:
    status = await store.health.check()
    assert status.ok, status
    thorough = await store.health.quick_check()
    assert thorough.ok, thorough
