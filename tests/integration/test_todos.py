"""The todo store on both backends: idempotent adds, dependencies, statuses, events; and
the session modes' compare-and-set."""

from __future__ import annotations

import pytest

from core.errors import ToolRetry
from core.events import EventLog
from core.orchestration.modes import SessionModes
from core.orchestration.todos import TodoStore, ready_todos
from core.store.engine import Store

KEY = "cli:plan"


async def test_adds_are_idempotent_and_dependencies_must_exist(store: Store) -> None:
    events = EventLog(store=store)
    todos = TodoStore(store=store, events=events)
    first, new = await todos.add(KEY, todo_id="fetch", title="  Fetch   the data ")
    again, new_again = await todos.add(KEY, todo_id="fetch", title="something else")
    assert new and not new_again and again == first and first.title == "Fetch the data"
    for bad, message in [
        ({"todo_id": "Bad Id", "title": "x"}, "short slug"),
        ({"todo_id": "x", "title": "   "}, "needs a title"),
        ({"todo_id": "x", "title": "x", "depends_on": ["x"]}, "itself"),
        ({"todo_id": "x", "title": "x", "depends_on": ["nope"]}, "unknown dependencies nope"),
    ]:
        with pytest.raises(ToolRetry, match=message):
            await todos.add(KEY, **bad)  # type: ignore[arg-type]
    await todos.add(KEY, todo_id="report", title="Report", depends_on=["fetch", "fetch"])
    listed = await todos.list(KEY)
    assert [t.id for t in listed] == ["fetch", "report"]
    assert listed[1].depends_on == ("fetch",) and listed[1].prompt == "Report"
    assert [t.id for t in ready_todos(listed)] == ["fetch"]
    await todos.set_status(KEY, "fetch", "done", result="rows")
    assert [t.id for t in ready_todos(await todos.list(KEY))] == ["report"]
    # Only from the status asked for; an unknown status or todo is refused.
    assert await todos.set_status(KEY, "fetch", "failed", when="pending") is None
    with pytest.raises(ToolRetry, match="status must be one of"):
        await todos.set_status(KEY, "fetch", "later")
    with pytest.raises(ToolRetry, match="no todo 'ghost'"):
        await todos.set_status(KEY, "ghost", "done")
    assert await todos.list("cli:other") == []
    types = [(e.type, e.data.status) for e in await events.list(KEY)]  # type: ignore[union-attr]
    assert types == [
        ("todo.updated", "pending"),
        ("todo.updated", "pending"),
        ("todo.updated", "done"),
    ]


async def test_autopilot_and_consolidation_claims(store: Store) -> None:
    events = EventLog(store=store)
    now = [1000.0]
    modes = SessionModes(store=store, events=events, clock=lambda: now[0])
    assert await modes.autopilot(KEY) is False
    assert await modes.set_autopilot(KEY, True) is True
    assert await modes.set_autopilot(KEY, True) is False  # no change, no event
    assert await modes.autopilot(KEY) is True
    assert await modes.claim_consolidation(KEY, period=60) is True
    assert await modes.claim_consolidation(KEY, period=60) is False
    now[0] += 59
    assert await modes.claim_consolidation(KEY, period=60) is False
    now[0] += 1
    assert await modes.claim_consolidation(KEY, period=60) is True
    assert await modes.claim_consolidation("cli:new", period=60) is True  # no row yet
    assert await modes.consolidated_at(KEY) == 1060.0
    assert await modes.autopilot(KEY) is True  # the claim kept the mode
    changed = [e.type for e in await events.list(KEY)]
    assert changed == ["session.mode_changed"]
