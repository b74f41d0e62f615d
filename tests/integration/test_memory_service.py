"""The memory service on a real store (SQLite and PostgreSQL): scopes, ranking, bad input."""

from __future__ import annotations

import pytest

from core.errors import MemoryNotFound, MemoryRefused
from core.memory.config import MemoryConfig
from core.memory.service import GLOBAL, Caller, MemoryService
from core.store.engine import Store

ALICE = Caller("cli:alice")
BOB = Caller("cli:bob")
CHILD = Caller.of("subagent:abc", depth=1)

CORPUS = [
    "The staging server deploys from the release branch every Tuesday.",
    "Alice prefers window seats and vegetarian meals on long flights.",
    "The production database password rotates on the first of each month.",
    "Deploying to production requires two approvals in the review tool.",
    "Bob's cat is called Miso and is allergic to chicken.",
    "Quarterly report numbers are kept in the finance spreadsheet.",
]


@pytest.fixture
def memory(store: Store) -> MemoryService:
    return MemoryService(store=store, config=MemoryConfig())


async def test_best_match_ranks_first(memory: MemoryService) -> None:
    for text in CORPUS:
        await memory.remember(ALICE, text, scope="global")
    cases = {
        "window seat vegetarian flight": CORPUS[1],
        "how do I deploy to production?": CORPUS[3],
        "cat allergy": CORPUS[4],
        "database password rotation": CORPUS[2],
    }
    for query, best in cases.items():
        found = await memory.recall(BOB, query)
        assert found, query
        assert found[0].text == best, (query, [f.text for f in found])


async def test_scopes_read_own_and_global(memory: MemoryService) -> None:
    mine = await memory.remember(ALICE, "alice likes green tea", tags=["drink"])
    glob = await memory.remember(ALICE, "the office wifi is called tea-house", scope="global")
    await memory.remember(BOB, "bob likes black tea")
    texts = {e.text for e in await memory.recall(ALICE, "tea")}
    assert texts == {mine.text, glob.text}
    assert {e.id for e in await memory.recall(ALICE, "tea", scope="session")} == {mine.id}
    assert {e.id for e in await memory.recall(ALICE, "tea", scope="global")} == {glob.id}
    assert mine.scope == "cli:alice" and glob.scope == GLOBAL
    assert (await memory.recall(ALICE, "tea", scope="session"))[0].tags == ("drink",)


async def test_refused_writes(memory: MemoryService) -> None:
    with pytest.raises(MemoryRefused, match="subagent"):
        await memory.remember(CHILD, "x", scope="global")
    with pytest.raises(MemoryRefused, match="not yours"):
        await memory.remember(ALICE, "x", scope="cli:bob")
    child_own = await memory.remember(CHILD, "child note")
    assert child_own.scope == "subagent:abc"
    bobs = await memory.remember(BOB, "bob's secret")
    with pytest.raises(MemoryNotFound, match=f"^there is no memory #{bobs.id}$"):
        await memory.forget(ALICE, bobs.id)
    glob = await memory.remember(ALICE, "shared", scope="global")
    with pytest.raises(MemoryRefused, match="subagent"):
        await memory.forget(CHILD, glob.id)
    with pytest.raises(MemoryNotFound):
        await memory.forget(ALICE, 999_999)
    await memory.forget(BOB, bobs.id)
    assert await memory.get(bobs.id) is None
    locked = MemoryService(store=memory._store, config=MemoryConfig(allow_global_writes=False))
    with pytest.raises(MemoryRefused, match="allow_global_writes"):
        await locked.remember(ALICE, "x", scope="global")


@pytest.mark.parametrize(
    ("text", "tags", "fragment"),
    [
        ("   ", (), "empty"),
        ("x" * 4001, (), "max_entry_chars"),
        ("ok", [f"t{i}" for i in range(21)], "at most 20"),
    ],
)
async def test_bad_input(memory: MemoryService, text: str, tags: list[str], fragment: str) -> None:
    with pytest.raises(MemoryRefused, match=fragment):
        await memory.remember(ALICE, text, tags=tags)


@pytest.mark.parametrize(
    "query", ['"unbalanced', "NOT AND OR", "*", "a:b (c", "' OR 1=1 --", "NEAR(x y)", "tea*"]
)
async def test_malformed_queries_never_raise_sql_errors(memory: MemoryService, query: str) -> None:
    await memory.remember(ALICE, "green tea with a near x y and b c")
    try:
        await memory.recall(ALICE, query)
    except MemoryRefused as exc:
        assert "no words" in str(exc)


async def test_recency_breaks_ties(store: Store) -> None:
    now = [1_000_000.0]
    memory = MemoryService(store=store, config=MemoryConfig(), clock=lambda: now[0])
    old = await memory.remember(ALICE, "the gate code is 4411")
    now[0] += 200 * 86_400
    new = await memory.remember(ALICE, "the gate code is 9902")
    found = await memory.recall(ALICE, "gate code")
    assert [e.id for e in found] == [new.id, old.id]


@pytest.mark.parametrize(
    ("text", "tags", "fragment"),
    [("a\x00b", (), "control character"), ("ok", ["a\x00b"], "control character")],
)
async def test_nul_characters_are_refused_and_change_nothing(
    memory: MemoryService, text: str, tags: list[str], fragment: str
) -> None:
    # PostgreSQL cannot store NUL in text: without the check this was a database error.
    with pytest.raises(MemoryRefused, match=fragment):
        await memory.remember(ALICE, text, tags=tags)
    assert await memory.list() == []


@pytest.mark.parametrize("entry_id", [0, 2**31, 2**63, -(2**63) - 1, 10**30])
async def test_ids_outside_the_integer_range_are_not_found(
    memory: MemoryService, entry_id: int
) -> None:
    with pytest.raises(MemoryNotFound):
        await memory.forget(ALICE, entry_id)
    with pytest.raises(MemoryNotFound):
        await memory.delete_any(entry_id)
    assert await memory.get(entry_id) is None
