"""Control API route for fleet todos: ``GET /v1/todos``."""

from __future__ import annotations

from aiohttp import web

from core.orchestration.todos import TodoStore

__all__ = ["add_todo_routes"]


def add_todo_routes(app: web.Application, todos: TodoStore) -> None:
    """Add ``GET /v1/todos?session=KEY`` -> ``{"todos": [...]}`` (every session's, in
    order of creation per session, when no session is given)."""

    async def list_todos(request: web.Request) -> web.Response:
        session = request.query.get("session") or None
        found = await todos.list(session)
        return web.json_response({"todos": [t.as_json() for t in found]})

    app.router.add_get("/v1/todos", list_todos)
