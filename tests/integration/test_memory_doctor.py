"""``familiar doctor`` reports how semantic recall searches vectors (SQLite, PostgreSQL)."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from core.memory.vectors import PGVECTOR_STATES, pgvector_state, sqlite_vec_problem
from core.store.engine import Store
from gateway.cli import app


@pytest.fixture
def home() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="fam-", dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _doctor(home: Path) -> Any:
    return CliRunner().invoke(app, ["doctor", "--home", str(home)], catch_exceptions=False)


def _config(home: Path, store_url: str, embeddings: str) -> None:
    (home / "config.toml").write_text(
        f'[provider]\nkind = "scripted"\n\n[store]\nurl = "{store_url}"\n\n{embeddings}'
    )


async def _offered(store_url: str) -> tuple[str, str]:
    """What the gateway would choose here: (backend, words of the reason)."""
    store = Store(url=store_url)
    await store.open()
    try:
        if store.is_sqlite:
            problem = await asyncio.to_thread(sqlite_vec_problem)
            return ("sqlite-vec", "") if problem is None else ("python fallback", problem)
        async with store.read() as conn:
            state = await pgvector_state(conn)
        if state == "missing":
            return "python fallback", PGVECTOR_STATES[state]
        return "pgvector", PGVECTOR_STATES[state]
    finally:
        await store.close()


async def test_doctor_reports_the_vector_search_backend(home: Path, store_url: str) -> None:
    backend, why = await _offered(store_url)
    embeddings = '[memory.embeddings]\nenabled = true\nmodel = "fake-embed"\nscan_limit = 700\n'
    _config(home, store_url, embeddings)
    out = (await asyncio.to_thread(_doctor, home)).stdout
    (line,) = [x for x in out.splitlines() if "memory vector search:" in x]
    assert line.split(": ", 1)[1].startswith(backend), line
    assert why in " ".join(out.split()), out  # rich may wrap the long line
    if backend == "python fallback":
        assert line.startswith("! "), line  # a warning: works, but slower
        assert "newest 700 vectors" in line


async def test_doctor_says_when_semantic_recall_is_off(home: Path, store_url: str) -> None:
    _config(home, store_url, "")
    out = (await asyncio.to_thread(_doctor, home)).stdout
    assert "✓ memory vector search: off ([memory.embeddings] enabled = false)" in out
