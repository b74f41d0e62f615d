"""`core.tasks.tree.task_trees`: each session's agents with the agents they started."""

from __future__ import annotations

from typing import Any

from core.store.engine import Store
from core.tasks.repository import TaskRepository
from core.tasks.tree import task_trees


async def _add(
    repo: TaskRepository, store: Store, task_id: str, owner: str, at: float, status: str
) -> None:
    values: dict[str, Any] = {
        "id": task_id,
        "owner_key": owner,
        "child_key": f"subagent:{task_id}",
        "agent_type": "explore",
        "description": f"task {task_id}",
        "prompt": "do it",
        "mode": "background",
        "memory_mode": "handoff",
        "status": status,
        "depth": owner.count("subagent:") + 1,
        "delivery": "{}",
        "message_id": f"m-{task_id}",
        "created_at": at,
        "updated_at": at,
    }
    await store.transact(lambda conn: repo.insert_in(conn, values))


def _shape(node: Any) -> Any:
    return (node.task.id, [_shape(c) for c in node.children])


async def test_trees_nest_by_owner_newest_session_first(store: Store) -> None:
    repo = TaskRepository(store=store)
    await _add(repo, store, "a1", "cli:alice", 10.0, "completed")
    await _add(repo, store, "a1x", "subagent:a1", 11.0, "completed")
    await _add(repo, store, "a1y", "subagent:a1", 12.0, "running")
    await _add(repo, store, "a1yz", "subagent:a1y", 13.0, "running")
    await _add(repo, store, "b1", "cli:bob", 20.0, "completed")
    await _add(repo, store, "a2", "cli:alice", 30.0, "idle")
    await _add(repo, store, "lost", "subagent:gone", 5.0, "failed")

    trees = await task_trees(repo)
    assert [t.session for t in trees] == ["cli:alice", "cli:bob", "subagent:gone"]
    alice = trees[0]
    assert [_shape(n) for n in alice.roots] == [
        ("a2", []),
        ("a1", [("a1x", []), ("a1y", [("a1yz", [])])]),
    ]
    body = alice.as_json()
    assert (body["total"], body["active"], body["updated_at"]) == (5, 3, 30.0)
    running = body["tasks"][1]["children"][1]
    assert running["progress"]["current"] == {"tool_calls": 0, "tool": None}
    assert "current" not in body["tasks"][0]["progress"]  # idle: nothing in flight

    (only,) = await task_trees(repo, session="cli:alice")
    assert [_shape(n) for n in only.roots] == [_shape(n) for n in alice.roots]
    assert await task_trees(repo, session="cli:nobody") == []

    newest = await task_trees(repo, limit=2)  # a2 and b1: a1's children without it
    assert {t.session: [_shape(n) for n in t.roots] for t in newest} == {
        "cli:alice": [("a2", [])],
        "cli:bob": [("b1", [])],
    }
