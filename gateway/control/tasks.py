"""Control API routes for subagents: list, show and cancel on ``/v1/tasks``."""

from __future__ import annotations

from aiohttp import web

from core.errors import TaskNotFound
from core.sessions import SessionStore
from core.tasks.records import ACTIVE
from core.tasks.registry import TaskRegistry

__all__ = ["add_task_routes"]

_HISTORY = 200


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": message}, status=status)


def add_task_routes(app: web.Application, tasks: TaskRegistry, sessions: SessionStore) -> None:
    """Add the subagent routes to the control app.

    - ``GET /v1/tasks?owner=KEY&active=1`` -> ``{"tasks": [...]}``, newest first.
    - ``GET /v1/tasks/{id}`` -> the task with prompt, result and its session's history.
    - ``DELETE /v1/tasks/{id}`` -> ``{"cancelled": [ids]}`` (the task and the agents it
      started, recursively; empty when it had already finished); 404 when unknown.
    """
    routes = _TaskRoutes(tasks, sessions)
    app.router.add_get("/v1/tasks", routes.list)
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

    async def show(self, request: web.Request) -> web.Response:
        task = await self._tasks.repo.get(request.match_info["id"])
        if task is None:
            return _error(404, f"no task {request.match_info['id']!r}")
        body = task.as_json(full=True)
        history = await self._sessions.all_history(task.child_key, limit=_HISTORY)
        body["history"] = [m.as_json() for m in history]
        return web.json_response(body)

    async def cancel(self, request: web.Request) -> web.Response:
        try:
            cancelled = await self._tasks.cancel(
                request.match_info["id"], reason="cancelled by the user (familiar tasks cancel)"
            )
        except TaskNotFound as exc:
            return _error(404, str(exc))
        task = await self._tasks.repo.get(request.match_info["id"])
        return web.json_response(
            {
                "cancelled": [t.id for t in cancelled],
                "status": task.status if task is not None else None,
            }
        )
