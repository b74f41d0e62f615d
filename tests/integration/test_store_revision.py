"""The migration fast path: a database at the newest revision is opened without alembic."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from alembic.script import ScriptDirectory

from core.store.engine import Store
from core.store.migrate import alembic_config, current_revision, head_revision

ROOT = Path(__file__).resolve().parents[2]


def test_head_revision_is_alembics_head() -> None:
    assert head_revision() == ScriptDirectory.from_config(alembic_config()).get_current_head()


async def test_a_new_database_is_migrated_to_the_head(store: Store) -> None:
    async with store.engine.connect() as conn:
        assert await conn.run_sync(current_revision) == head_revision()


def test_an_up_to_date_database_opens_without_importing_alembic(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'familiar.db'}"
    script = (
        "import asyncio, sys\n"
        "from core.store.engine import Store\n"
        "async def main():\n"
        f"    store = Store(url={url!r})\n"
        "    await store.open()\n"
        "    await store.close()\n"
        "asyncio.run(main())\n"
        "print('alembic' in sys.modules)\n"
    )

    def run() -> str:
        done = subprocess.run(
            [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=True
        )
        return done.stdout.strip()

    assert run() == "True"  # the first open migrates a new file with alembic
    assert run() == "False"  # the next one only reads the revision
