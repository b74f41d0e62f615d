"""Control API routes for subagents: list, trees, show and cancel on ``/v1/tasks``."""

from __future__ import annotations

import re

from aiohttp import web

from core.errors import TaskNotFound
from core.session_keys import check_session_key
from core.sessions import SessionStore
from core.tasks.records import ACTIVE
from core.tasks.registry import TaskRegistry
from core.tasks.tree import task_trees, turn_progress

__all__ = ["add_task_routes"]

_HISTORY = 200
_TREE_LIMIT = 500
_BY = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@+=:-]{0,127}")
"""Who cancels (``ui:alice``): shown in the task's error and the parent's event log."""


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": message}, status=status)


def add_task_routes(app: web.Application, tasks: TaskRegistry, sessions: SessionStore) -> None:
    """Add the subagent routes to the control app.

    - ``GET /v1/tasks?owner=KEY&active=1`` -> ``{"tasks": [...]}``, newest first.
    - ``GET /v1/tasks/tree?session=KEY&limit=N`` -> ``{"sessions": [...]}``: per parent
      session (the most recently changed first) its agents, newest first, each with
      ``children`` (the agents it started, oldest first) and, while running,
      ``progress.current`` (tool calls of the turn it is in, the last tool); 400 for a
      bad key or limit.
    - ``GET /v1/tasks/{id}`` -> the task with prompt, result and its session's history
      (and ``progress.current`` while it runs, as in the tree).
    - ``DELETE /v1/tasks/{id}?by=WHO`` -> ``{"cancelled": [ids], "status"}`` (the task
      and the agents it started, recursively; empty when it had already finished),
      recorded as cancelled by ``WHO`` (default: the user); 404 when unknown.
    """
    routes = _TaskRoutes(tasks, sessions)
    app.router.add_get("/v1/tasks", routes.list)
    # Before /v1/tasks/{id}: "tree" is no task id (those are 12 hex digits).
    app.router.add_get("/v1/tasks/tree", routes.tree)
    app.router.add_get("/v1/tasks/{id}", routes.show)
    app.router.add_delete("/v1/tasks/{id}", routes.cancel)


class _TaskRoutes:
    def __init__(self, tasks: TaskRegistry, sessions: SessionStore) -> None:
        self._tasks = tasks
        self._sessions = sessions

    async def list(self, request: web.Request) -> web.Response:
        owner = request.query.get("owner") or None
        active = request.query.get("active") in ("1", "true")
        found = await self._tasks.repo.list(
            owner_key=owner, statuses=ACTIVE if active else (), limit=500
        )
        return web.json_response({"tasks": [t.as_json() for t in found]})

    async def tree(self, request: web.Request) -> web.Response:
        session = request.query.get("session") or None
        raw = request.query.get("limit", str(_TREE_LIMIT))
        if not raw.isdigit() or not 1 <= int(raw) <= _TREE_LIMIT:
            return _error(400, f"'limit' must be a whole number from 1 to {_TREE_LIMIT}")
        if session is not None:
            try:
                check_session_key(session)
            except ValueError as exc:
                return _error(400, str(exc))
        trees = await task_trees(self._tasks.repo, session=session, limit=int(raw))
        return web.json_response({"sessions": [t.as_json() for t in trees]})

    async def show(self, request: web.Request) -> web.Response:
        task = await self._tasks.repo.get(request.match_info["id"])
        if task is None:
            return _error(404, f"no task {request.match_info['id']!r}")
        body = task.as_json(full=True)
        current = await turn_progress(self._tasks.repo, task)
        if current is not None:
            body["progress"]["current"] = {"tool_calls": current[0], "tool": current[1]}
        history = await self._sessions.all_history(task.child_key, limit=_HISTORY)
        body["history"] = [m.as_json() for m in history]
        return web.json_response(body)

    async def cancel(self, request: web.Request) -> web.Response:
        by = request.query.get("by")
        if by is not None and not _BY.fullmatch(by):
            return _error(400, "'by' is 1-128 letters, digits or ._@+=:- (e.g. ui:alice)")
        reason = f"cancelled by {by}" if by else "cancelled by the user (familiar tasks cancel)"
        try:
            cancelled = await self._tasks.cancel(request.match_info["id"], reason=reason)
        except TaskNotFound as exc:
            return _error(404, str(exc))
        task = await self._tasks.repo.get(request.match_info["id"])
        return web.json_response(
            {
                "cancelled": [t.id for t in cancelled],
                "status": task.status if task is not None else None,
            }
        )
