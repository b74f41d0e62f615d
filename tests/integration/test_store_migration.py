"""The supervisor's first step (``python -m gateway.daemon --migrate``): the store brought
to the newest migration by a process that then exits, so no role keeps alembic."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from core.store.engine import Store
from core.store.migrate import current_revision, head_revision
from gateway.config import DB_FILE
from gateway.store_migration import migrate_store
from tests.daemon_env import REPO, daemon_env


@pytest.fixture(autouse=True)
def _restore_logging(restore_root_logging: None) -> None:
    """migrate_store sets up logging in this process."""


async def _revision(home: Path) -> str | None:
    store = Store(url=f"sqlite+aiosqlite:///{home / DB_FILE}")
    await store.open(migrate=False)
    try:
        async with store.engine.connect() as conn:
            return await conn.run_sync(current_revision)
    finally:
        await store.close()


async def test_a_new_home_is_migrated_to_the_head(tmp_path: Path) -> None:
    home = tmp_path / "home"
    assert await migrate_store(home) == 0
    assert await _revision(home) == head_revision()
    assert await migrate_store(home) == 0  # at the head already: nothing to do


async def test_a_damaged_store_is_one_line_and_status_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home = tmp_path / "home"
    assert await migrate_store(home) == 0
    (home / DB_FILE).write_bytes(b"not a database" * 1000)
    capsys.readouterr()
    assert await migrate_store(home) == 1
    err = capsys.readouterr().err
    assert err.startswith("familiar: cannot migrate the store:") and err.count("\n") == 1, err


def test_the_command_line_migrates_and_refuses_a_role(tmp_path: Path) -> None:
    home = tmp_path / "home"
    command = [sys.executable, "-m", "gateway.daemon", "--home", str(home), "--migrate"]
    done = subprocess.run(command, cwd=REPO, env=daemon_env(), capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert (home / DB_FILE).exists()
    refused = subprocess.run(
        [*command, "--role", "agent"], cwd=REPO, env=daemon_env(), capture_output=True, text=True
    )
    assert refused.returncode == 2 and "--migrate runs no role" in refused.stderr
