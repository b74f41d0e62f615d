"""The ``todo`` tool: a session's plan as todos with dependencies, run as subagents."""

from __future__ import annotations

from typing import Any, Literal

from core.errors import TaskRefused, ToolRetry
from core.orchestration.todos import FINISHED, Todo, TodoStore, ready_todos
from core.tasks.handoff import clip
from core.tasks.registry import SpawnRequest, TaskRegistry
from core.tools.base import Tool, ToolContext
from core.tools.decorator import Dep, tool
from core.tools.policy import ToolPolicy

__all__ = ["SPAWN_TOOL", "start_todo", "todo", "todo_tools"]

_RESULT_CHARS = 2000
SPAWN_TOOL = "sessions_spawn"
"""The tool whose policy starting an agent follows, however it is started."""


def _board(todos: list[Todo]) -> dict[str, Any]:
    ready = [t.id for t in ready_todos(todos)]
    return {
        "todos": [t.as_json(result_chars=_RESULT_CHARS) for t in todos],
        "ready": ready,
        "all_finished": bool(todos) and all(t.status in FINISHED for t in todos),
    }


def _brief(todo: Todo, todos: list[Todo]) -> str:
    """The subagent's prompt: the todo, and what the todos it depends on found."""
    done = {t.id: t for t in todos}
    parts = [todo.prompt]
    for dep in todo.depends_on:
        found = done.get(dep)
        if found is not None and found.result:
            parts.append(
                f"Result of '{found.title}' (done before this):\n{clip(found.result, 4000)}"
            )
    return "\n\n".join(parts)


async def start_todo(
    ctx: ToolContext, store: TodoStore, registry: TaskRegistry, item: Todo, todos: list[Todo]
) -> Todo:
    """Start ``item`` as a background subagent once its dependencies are done.

    Idempotent: a todo that has its agent already is returned as it is, and a rerun of
    the same message after a restart finds the same agent (the registry's spawn key).

    Raises:
        PolicyDenied: ``sessions_spawn`` is refused to this caller (channel, agent, depth).
        ToolRetry: a dependency is not done, or the concurrency cap is reached.
    """
    if item.agent_id is not None or item.status != "pending":
        return item
    policy = ctx.deps.get(ToolPolicy)
    if policy is not None:  # starting a todo is spawning: where sessions_spawn may not run
        policy.check(
            SPAWN_TOOL,
            channel=ctx.channel,
            agent_type=ctx.agent_type,
            depth=ctx.depth,
            lineage=ctx.lineage,
        )
    status = {t.id: t.status for t in todos}
    waiting = [
        f"{d} ({status.get(d, 'missing')})" for d in item.depends_on if status.get(d) != "done"
    ]
    if waiting:
        raise ToolRetry(
            f"todo {item.id!r} waits for {', '.join(waiting)}: start it once they are done"
        )
    request = SpawnRequest(
        owner_key=ctx.session_key,
        owner_depth=ctx.depth,
        agent_type=item.agent_type,
        prompt=_brief(item, todos),
        description=f"todo {item.id}: {item.title}",
        mode="background",
        parent=ctx.message,
        handoff=False,
    )
    try:
        task, new = await registry.spawn(request)
    except TaskRefused as exc:
        raise ToolRetry(str(exc)) from None
    started = await store.set_status(
        ctx.session_key,
        item.id,
        "in_progress",
        agent_id=task.id,
        when="pending",
        message_id=ctx.message_id or None,
    )
    if started is None:
        if new:  # someone else started it meanwhile: one agent per todo
            await registry.cancel(task.id, reason=f"todo {item.id} was started elsewhere")
        return await store.get(ctx.session_key, item.id)
    return started


@tool
async def todo(
    ctx: ToolContext,
    store: Dep[TodoStore],
    registry: Dep[TaskRegistry],
    action: Literal["add", "list", "update", "start"],
    id: str | None = None,
    title: str | None = None,
    prompt: str | None = None,
    depends_on: list[str] | None = None,
    agent_type: str = "general-purpose",
    status: Literal["pending", "in_progress", "done", "failed", "cancelled"] | None = None,
    result: str | None = None,
) -> dict[str, Any]:
    """This conversation's todos: a plan of steps with dependencies, kept across restarts.
    add: a todo (id, title, prompt for the agent that will do it, depends_on ids of
    todos added before); adding an existing id changes nothing. list: every todo, with
    those ready to start. update: set a todo's status (and result) yourself. start: run
    the todo id as a background subagent, or without id every ready todo (dependencies
    done); its status follows the agent's.

    Args:
        action: add, list, update or start.
        id: The todo's short slug, e.g. "write-tests" (add, update; start: optional).
        title: What the todo is, in a few words (add).
        prompt: Everything the agent doing it needs to know (add; default: the title).
        depends_on: Ids of todos that must be done before this one starts (add).
        agent_type: The agent type that does it (add; default general-purpose).
        status: The new status (update).
        result: What came of it (update, optional).
    """
    key = ctx.session_key
    if action == "add":
        if not id or not title:
            raise ToolRetry("add needs id and title")
        added, new = await store.add(
            key,
            todo_id=id,
            title=title,
            prompt=prompt or "",
            agent_type=agent_type,
            depends_on=depends_on or (),
            message_id=ctx.message_id or None,
        )
        return {"added": new, "todo": added.as_json(result_chars=_RESULT_CHARS)}
    if action == "update":
        if not id or status is None:
            raise ToolRetry("update needs id and status")
        current = await store.get(key, id)
        if status == "cancelled" and current.agent_id and current.status == "in_progress":
            await registry.cancel(current.agent_id, reason=f"todo {id} was cancelled")
        await store.set_status(key, id, status, result=result, message_id=ctx.message_id or None)
        return _board(await store.list(key))
    todos = await store.list(key)
    if action == "start":
        chosen = [await store.get(key, id)] if id else ready_todos(todos)
        if not chosen:
            raise ToolRetry("no todo is ready: every pending one waits for another")
        started, refused = [], {}
        for item in chosen:
            try:
                started.append(await start_todo(ctx, store, registry, item, todos))
            except ToolRetry as exc:
                if id:
                    raise
                refused[item.id] = str(exc)  # e.g. the concurrency cap: start it later
        found = _board(await store.list(key))
        found["started"] = [{"id": t.id, "agent_id": t.agent_id} for t in started]
        if refused:
            found["not_started"] = refused
        return found
    return _board(todos)


def todo_tools() -> list[Tool]:
    """The ``todo`` tool (needs a TodoStore and a TaskRegistry in the tool deps)."""
    return [todo]
