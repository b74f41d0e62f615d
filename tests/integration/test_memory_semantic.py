"""Semantic recall on a real store (SQLite and PostgreSQL) against the fake endpoint."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import pytest
from sqlalchemy import text

from core.memory.config import EmbeddingsConfig, MemoryConfig
from core.memory.semantic import SemanticRecall
from core.memory.service import Caller, MemoryService
from core.memory.vectors import PGVECTOR_STATES, Backend, pgvector_state, sqlite_vec_problem
from core.store.engine import Store
from tests.fakes.fake_openai import FakeOpenAI
from tests.waiting import eventually

ALICE = Caller("cli:alice")
CORPUS = [
    "My car is parked on level three of the garage.",
    "The dentist appointment moved to Friday morning.",
    "Quarterly report numbers are kept in the finance spreadsheet.",
    "Bob's cat is called Miso and is allergic to chicken.",
]


@pytest.fixture
async def fake() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI() as server:
        yield server


def _service(store: Store, base_url: str) -> MemoryService:
    config = MemoryConfig(
        embeddings=EmbeddingsConfig(
            enabled=True, base_url=base_url, model="fake-embed", dimensions=64, timeout=2.0
        )
    )
    semantic = SemanticRecall(store=store, config=config.embeddings)
    return MemoryService(store=store, config=config, semantic=semantic)


async def _vectors(store: Store) -> int:
    async with store.read() as conn:
        return int((await conn.execute(text("SELECT count(*) FROM memory_vectors"))).scalar_one())


async def test_meaning_without_shared_words_ranks_first(store: Store, fake: FakeOpenAI) -> None:
    memory = _service(store, fake.base_url)
    assert memory.semantic is not None
    for line in CORPUS:
        await memory.remember(ALICE, line, scope="global")
    assert await memory.semantic.run_once() == len(CORPUS)
    assert await _vectors(store) == len(CORPUS)

    found = await memory.recall(ALICE, "automobile whereabouts")
    assert found and found[0].text == CORPUS[0], [f.text for f in found]
    found = await memory.recall(ALICE, "physician visit")
    assert found[0].text == CORPUS[1]
    # full-text matches still count: a shared word ranks its entry first
    assert (await memory.recall(ALICE, "finance spreadsheet"))[0].text == CORPUS[2]
    assert memory.semantic.index.backend in {"sqlite-vec", "pgvector", "python"}

    forgotten = await memory.recall(ALICE, "automobile")
    await memory.forget(ALICE, forgotten[0].id)
    assert await _vectors(store) == len(CORPUS) - 1  # the vector went with its entry
    await memory.semantic.stop()


async def test_endpoint_down_recall_uses_full_text(
    store: Store, fake: FakeOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    fake.embeddings_down[0] = True
    memory = _service(store, fake.base_url)
    assert memory.semantic is not None
    caplog.set_level(logging.WARNING, logger="core.memory.semantic")
    entry = await memory.remember(ALICE, CORPUS[0], scope="global")  # never fails
    assert await memory.semantic.run_once() == 0
    assert [e.id for e in await memory.recall(ALICE, "car garage")] == [entry.id]
    assert await memory.recall(ALICE, "automobile whereabouts") == []
    assert sum("endpoint failing" in r.message for r in caplog.records) == 1  # logged once

    fake.embeddings_down[0] = False  # back: the background pass catches up
    memory.semantic.config.__dict__["retry_seconds"] = 0.0
    assert await memory.semantic.run_once() == 1
    assert (await memory.recall(ALICE, "automobile whereabouts"))[0].id == entry.id
    await memory.semantic.stop()


async def test_unreachable_endpoint(store: Store) -> None:
    memory = _service(store, "http://127.0.0.1:9/v1")
    assert memory.semantic is not None
    entry = await memory.remember(ALICE, CORPUS[1])
    assert await memory.semantic.run_once() == 0
    assert [e.id for e in await memory.recall(ALICE, "dentist")] == [entry.id]
    await memory.semantic.stop()


async def test_background_task_embeds_after_remember(store: Store, fake: FakeOpenAI) -> None:
    memory = _service(store, fake.base_url)
    assert memory.semantic is not None
    await memory.semantic.start()
    try:
        await memory.remember(ALICE, CORPUS[0])

        async def embedded() -> bool:
            return await _vectors(store) == 1

        await eventually(embedded, timeout=10, what="one vector stored")
    finally:
        await memory.semantic.stop()


# -- the vector search backend: decided once, logged, and the bounded Python fallback ------


async def _expected_backend(store: Store) -> tuple[str, str]:
    """What this machine offers: (backend, words the reason must contain)."""
    if store.is_sqlite:
        problem = await asyncio.to_thread(sqlite_vec_problem)
        return ("sqlite-vec", "") if problem is None else ("python", problem)
    async with store.read() as conn:
        state = await pgvector_state(conn)
    return ("python", PGVECTOR_STATES[state]) if state == "missing" else ("pgvector", "")


async def test_backend_is_decided_at_start_and_logged_once(
    store: Store, fake: FakeOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="core.memory.vectors")
    memory = _service(store, fake.base_url)
    assert memory.semantic is not None
    backend, why = await _expected_backend(store)
    await memory.semantic.start()
    try:
        assert memory.semantic.index.backend == backend  # before any recall
        await memory.remember(ALICE, CORPUS[0], scope="global")
        await eventually(lambda: _vectors_are(store, 1), what="the entry embedded")
        for _ in range(3):
            assert (await memory.recall(ALICE, "automobile whereabouts"))[0].text == CORPUS[0]
    finally:
        await memory.semantic.stop()
    lines = [r for r in caplog.records if r.getMessage().startswith("memory vector search:")]
    assert len(lines) == 1, [r.getMessage() for r in lines]
    assert lines[0].levelno == logging.INFO
    assert lines[0].getMessage().startswith(f"memory vector search: {backend}")
    assert why in lines[0].getMessage()
    if backend == "python":
        assert "newest 5000 vectors" in lines[0].getMessage()


async def _vectors_are(store: Store, count: int) -> bool:
    return await _vectors(store) == count


def _forced(store: Store, base_url: str, backend: Backend, scan_limit: int) -> MemoryService:
    embeddings = EmbeddingsConfig(
        enabled=True, base_url=base_url, model="fake-embed", dimensions=64, scan_limit=scan_limit
    )
    semantic = SemanticRecall(store=store, config=embeddings, backend=backend)
    config = MemoryConfig(embeddings=embeddings)
    return MemoryService(store=store, config=config, semantic=semantic, clock=_Clock())


class _Clock:
    """Each entry one minute newer than the one before (so "newest" is well defined)."""

    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        self.now += 60
        return self.now


async def test_python_fallback_ranks_by_meaning(store: Store, fake: FakeOpenAI) -> None:
    memory = _forced(store, fake.base_url, "python", scan_limit=100)
    assert memory.semantic is not None
    for line in CORPUS:
        await memory.remember(ALICE, line, scope="global")
    await memory.remember(Caller("cli:bob"), "Bob's own car is red.")  # another scope
    assert await memory.semantic.run_once() == len(CORPUS) + 1
    assert (await memory.recall(ALICE, "automobile whereabouts"))[0].text == CORPUS[0]
    assert (await memory.recall(ALICE, "physician visit"))[0].text == CORPUS[1]
    assert all("Bob's own" not in e.text for e in await memory.recall(ALICE, "automobile"))
    await memory.semantic.stop()


async def test_python_fallback_compares_only_the_newest_scan_limit_vectors(
    store: Store, fake: FakeOpenAI
) -> None:
    memory = _forced(store, fake.base_url, "python", scan_limit=2)
    assert memory.semantic is not None
    for line in CORPUS:  # CORPUS[0] (the car) is the oldest, outside the newest two
        await memory.remember(ALICE, line, scope="global")
    assert await memory.semantic.run_once() == len(CORPUS)
    found = [e.text for e in await memory.recall(ALICE, "automobile whereabouts")]
    assert CORPUS[0] not in found, found
    assert (await memory.recall(ALICE, "feline pet"))[0].text == CORPUS[3]  # within reach
    await memory.semantic.stop()


async def test_scan_limit_zero_is_full_text_alone(store: Store, fake: FakeOpenAI) -> None:
    memory = _service_with(store, fake.base_url, scan_limit=0)
    assert memory.semantic is not None
    await memory.semantic.start()
    try:
        assert memory.semantic.index.backend in {"none", "sqlite-vec", "pgvector"}
        for line in CORPUS:
            await memory.remember(ALICE, line, scope="global")
        await eventually(lambda: _vectors_are(store, len(CORPUS)), what="entries embedded")
        if memory.semantic.index.backend == "none":
            assert await memory.recall(ALICE, "automobile whereabouts") == []
        assert (await memory.recall(ALICE, "garage"))[0].text == CORPUS[0]
    finally:
        await memory.semantic.stop()


def _service_with(store: Store, base_url: str, *, scan_limit: int) -> MemoryService:
    embeddings = EmbeddingsConfig(
        enabled=True, base_url=base_url, model="fake-embed", dimensions=64, scan_limit=scan_limit
    )
    semantic = SemanticRecall(store=store, config=embeddings)
    return MemoryService(store=store, config=MemoryConfig(embeddings=embeddings), semantic=semantic)
