"""Subagent trees: each session's agents with the agents they started, and live progress.

A child's ``owner_key`` is its parent's session: a top-level agent's owner is the user's
session (``cli:alice``), a nested one's is its parent agent's ``subagent:<id>``. The
record's ``turns``/``tool_calls`` are only brought up to date when an answer is
recorded, so a running agent's node also carries the tool calls of the turn it is in
(from its event log), as ``subagents(action='read')`` would see them at the end.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from core.tasks.profiles import SUBAGENT_PREFIX
from core.tasks.records import MCP_TASK, TaskRecord
from core.tasks.repository import TaskRepository

__all__ = ["SessionTree", "TaskNode", "task_trees", "turn_progress"]

_MAX_DEPTH = 16
"""Levels followed below a session (far more than ``tools.subagents.max_depth`` allows)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskNode:
    """One agent and the agents it started (oldest first)."""

    task: TaskRecord
    children: tuple[TaskNode, ...] = ()
    current_tool_calls: int = 0
    """Running: tool calls finished in the turn it is in (not yet in ``task.tool_calls``)."""
    current_tool: str | None = None
    """Running: the last tool it started in that turn."""

    def count(self, *, active: bool) -> int:
        """This node and its descendants (only active ones with ``active``)."""
        own = 1 if not active or self.task.active else 0
        return own + sum(c.count(active=active) for c in self.children)

    def as_json(self) -> dict[str, Any]:
        found = self.task.as_json()
        if self.task.status == "running":
            found["progress"]["current"] = {
                "tool_calls": self.current_tool_calls,
                "tool": self.current_tool,
            }
        found["children"] = [c.as_json() for c in self.children]
        return found


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionTree:
    """The agents a session started (newest first), each with its descendants."""

    session: str
    roots: tuple[TaskNode, ...]

    @property
    def updated_at(self) -> float:
        return max(_newest(n) for n in self.roots)

    def as_json(self) -> dict[str, Any]:
        return {
            "session": self.session,
            "total": sum(n.count(active=False) for n in self.roots),
            "active": sum(n.count(active=True) for n in self.roots),
            "updated_at": self.updated_at,
            "tasks": [n.as_json() for n in self.roots],
        }


def _newest(node: TaskNode) -> float:
    return max([node.task.updated_at, *(_newest(c) for c in node.children)])


async def task_trees(
    repo: TaskRepository, *, session: str | None = None, limit: int = 500
) -> list[SessionTree]:
    """The subagent trees, the session with the most recent change first.

    Args:
        repo: the task rows.
        session: only the tree of this session (every level below it).
        limit: at most this many agents (the newest; a child is newer than its parent,
            so a parent that is listed has its children listed too).
    """
    if session is None:
        tasks = await repo.list(limit=limit)
    else:
        tasks = await _below(repo, session, limit)
    progress = {t.id: found for t in tasks if (found := await turn_progress(repo, t)) is not None}
    trees = _forest(tasks, progress)
    if session is not None:
        trees = [t for t in trees if t.session == session]
    return sorted(trees, key=lambda t: t.updated_at, reverse=True)


async def turn_progress(repo: TaskRepository, task: TaskRecord) -> tuple[int, str | None] | None:
    """A running agent's tool calls in the turn it is in, and its last tool (None when
    it is not running, or is an MCP task: its server does the work)."""
    if task.status != "running" or task.message_id is None or task.agent_type == MCP_TASK:
        return None
    return await repo.tool_progress(task.child_key, task.message_id)


async def _below(repo: TaskRepository, session: str, limit: int) -> list[TaskRecord]:
    found: list[TaskRecord] = []
    owners = [session]
    for _ in range(_MAX_DEPTH):
        if not owners or len(found) >= limit:
            break
        level = await repo.list(owner_keys=owners, limit=limit - len(found))
        found.extend(level)
        owners = [t.child_key for t in level]
    return found


def _forest(
    tasks: Sequence[TaskRecord], progress: dict[str, tuple[int, str | None]]
) -> list[SessionTree]:
    by_child = {t.child_key: t for t in tasks}
    children: dict[str, list[TaskRecord]] = {}
    roots: dict[str, list[TaskRecord]] = {}
    for task in tasks:
        # A nested agent whose parent is not listed stands as a root under that
        # parent's session key (``subagent:<id>``).
        if task.owner_key.startswith(SUBAGENT_PREFIX) and task.owner_key in by_child:
            children.setdefault(task.owner_key, []).append(task)
        else:
            roots.setdefault(task.owner_key, []).append(task)

    def node(task: TaskRecord, depth: int) -> TaskNode:
        below = children.get(task.child_key, []) if depth < _MAX_DEPTH else []
        calls, tool = progress.get(task.id, (0, None))
        return TaskNode(
            task=task,
            children=tuple(
                node(c, depth + 1) for c in sorted(below, key=lambda c: (c.created_at, c.id))
            ),
            current_tool_calls=calls,
            current_tool=tool,
        )

    return [
        SessionTree(
            session=owner,
            roots=tuple(node(t, 0) for t in sorted(listed, key=lambda t: (-t.created_at, t.id))),
        )
        for owner, listed in roots.items()
    ]
