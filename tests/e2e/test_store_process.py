"""The real daemon process and its database file: damaged at start, deleted while serving."""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.daemon_env import daemon_env
from tests.e2e.test_daemon_process import REPO, daemon

pytestmark = pytest.mark.slow


@pytest.fixture
def home() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="fam-", dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


CONFIG = '[provider]\nkind = "scripted"\n\n[http]\nport = 0\n'


def _write_config(home: Path) -> None:
    (home / "config.toml").write_text(CONFIG)
    os.chmod(home / "config.toml", 0o600)


async def _run_daemon(home: Path) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "gateway.daemon", "--home", str(home),
        cwd=REPO, env=daemon_env(single=True), stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    _, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return proc.returncode, err.decode()


async def _serve_and_stop(home: Path) -> None:
    async with daemon(home) as d:
        await d.wait_ready()
        await d.submit("cli:x", "hello")
        d.proc.terminate()  # type: ignore[union-attr]
        assert await d.wait() == 0, d.logs()


async def test_corrupted_database_is_one_line_on_stderr(home: Path) -> None:
    _write_config(home)
    await _serve_and_stop(home)
    db = home / "familiar.db"
    with db.open("r+b") as f:
        f.seek(db.stat().st_size // 2)
        f.write(os.urandom(8192))
    code, err = await _run_daemon(home)
    assert code == 1, err
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err
    assert err.startswith(f"familiar: cannot start: the database {db} is corrupted"), err


async def test_deleting_the_database_stops_the_daemon_with_exit_1(home: Path) -> None:
    _write_config(home)
    async with daemon(home) as d:
        await d.wait_ready()
        await d.submit("cli:x", "hello")
        (home / "familiar.db").unlink()
        started = time.monotonic()
        assert await d.wait() == 1, d.logs()
        assert time.monotonic() - started < 15
    lost = [line for line in d.logs().splitlines() if "store lost" in line]
    assert len(lost) == 1, d.logs()
    db = home / "familiar.db"
    assert f"{db} was deleted while open" in lost[0]
    assert not db.exists()  # nothing recreated it on the way out
    # A restart (systemd's Restart=on-failure) does not start over on an empty database.
    code, err = await _run_daemon(home)
    assert code == 1, err
    assert len(err.strip().splitlines()) == 1, err
    assert f"the database {db} is missing but its write-ahead log" in err
