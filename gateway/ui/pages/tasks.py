"""The Tasks page: each session's subagent tree, live; one agent's conversation; cancel.

Everything comes from the control API (``GET /v1/tasks/tree``, ``GET /v1/tasks/{id}``,
``DELETE /v1/tasks/{id}?by=ui:<operator>``), the routes ``familiar tasks`` uses. The
live parts are Server-Sent Events: the stream asks the control API again every
`POLL_SECONDS` and sends the rendered fragment only when it changed (task rows change
in whichever gateway process runs the agent, so the store is where the news is).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from html import escape
from typing import Any
from urllib.parse import urlencode

from aiohttp import web

from gateway.control.client import ControlError, DaemonUnavailable
from gateway.ui.polling import push_views
from gateway.ui.render import render, render_text, session_of
from gateway.ui.routes import EventStream, UiRoutes, after_action

__all__ = ["POLL_SECONDS", "add_routes"]

POLL_SECONDS = 1.0
"""How often a live view asks the control API again."""
_TASK_ID = re.compile(r"[A-Za-z0-9_-]{1,32}")
_ACTIVE = ("running", "idle")


def add_routes(ui: UiRoutes) -> None:
    pages = _TaskPages(ui)
    ui.page("/tasks", pages.index)
    ui.stream("/tasks/events", pages.index_events)
    ui.page("/tasks/{id}", pages.task)
    ui.stream("/tasks/{id}/events", pages.task_events)
    ui.action("/tasks/{id}/cancel", pages.cancel)


def _session_filter(request: web.Request) -> str | None:
    return request.query.get("session", "").strip() or None


def _task_id(request: web.Request) -> str:
    task_id = request.match_info["id"]
    if not _TASK_ID.fullmatch(task_id):
        raise web.HTTPNotFound(text=f"no task {task_id[:40]!r}")
    return task_id


def _count(number: object, word: str) -> str:
    """``1 turn``, ``2 turns``."""
    return f"{number} {word}" if number == 1 else f"{number} {word}s"


_HELPERS = {"count": _count, "active": _ACTIVE}
"""What the templates use (no "5s ago": a live view changes only when the tasks do)."""


class _TaskPages:
    def __init__(self, ui: UiRoutes) -> None:
        self._ui = ui

    async def _trees(self, session: str | None) -> tuple[list[dict[str, Any]], str | None]:
        """The trees, or an empty list and why the control API did not give them."""
        try:
            async with self._ui.client() as client:
                return await client.task_trees(session=session), None
        except ControlError as exc:
            return [], str(exc)

    async def _trees_html(self, request: web.Request, session: str | None) -> str:
        trees, problem = await self._trees(session)
        return render_text(
            request,
            "tasks/_trees.html",
            trees=trees,
            problem=problem,
            session=session,
            **_HELPERS,
        )

    async def index(self, request: web.Request) -> web.Response:
        session = _session_filter(request)
        return render(
            request,
            "tasks.html",
            title="Tasks",
            session=session,
            trees_html=await self._trees_html(request, session),
        )

    async def index_events(self, request: web.Request, stream: EventStream) -> None:
        session = _session_filter(request)

        async def view() -> tuple[str, bool]:
            return await self._trees_html(request, session), False

        await _live(stream, view)

    async def _task(self, task_id: str) -> dict[str, Any]:
        async with self._ui.client() as client:
            return await client.task(task_id)

    def _task_html(self, request: web.Request, task: dict[str, Any]) -> str:
        return render_text(request, "tasks/_task.html", task=task, **_HELPERS)

    async def task(self, request: web.Request) -> web.Response:
        task = await self._task(_task_id(request))
        return render(
            request,
            "tasks/task.html",
            title=f"Task {task.get('id')}",
            task=task,
            task_html=self._task_html(request, task),
        )

    async def task_events(self, request: web.Request, stream: EventStream) -> None:
        task_id = _task_id(request)

        async def view() -> tuple[str, bool]:
            try:
                task = await self._task(task_id)
            except ControlError as exc:
                return _problem(str(exc)), exc.status == 404
            # A finished agent changes no more: its last view, then the stream ends.
            return self._task_html(request, task), task.get("status") not in _ACTIVE

        await _live(stream, view)

    async def cancel(self, request: web.Request) -> web.StreamResponse:
        task_id = _task_id(request)
        form = await request.post()
        async with self._ui.client() as client:
            await client.cancel_task(task_id, by=f"ui:{session_of(request).operator}")
        if form.get("back") == "task":
            html = self._task_html(request, await self._task(task_id))
            redirect = f"/ui/tasks/{task_id}"
        else:
            session = str(form.get("session") or "").strip() or None
            html = await self._trees_html(request, session)
            redirect = "/ui/tasks" + (f"?{urlencode({'session': session})}" if session else "")
        fragment = web.Response(text=html, content_type="text/html")
        return after_action(request, redirect=redirect, fragment=fragment)


def _problem(text: str) -> str:
    return f'<p class="error" role="alert">{escape(text)}</p>'


async def _live(stream: EventStream, view: Callable[[], Awaitable[tuple[str, bool]]]) -> None:
    """Send the view whenever it changes, until it says it is the last one (or the
    gateway stops)."""

    async def shown() -> tuple[str, bool]:
        try:
            return await view()
        except DaemonUnavailable as exc:
            return _problem(str(exc)), False

    await push_views(stream, shown, every=POLL_SECONDS)
