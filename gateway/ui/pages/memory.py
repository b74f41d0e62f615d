"""The Memory page: search, list by scope, forget (through ``/v1/memory``, as the CLI)."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlencode

from aiohttp import web

from gateway.control.client import ControlError
from gateway.ui.render import render, render_text
from gateway.ui.routes import UiRoutes, after_action

__all__ = ["add_routes"]

_LIST_LIMIT = 200
_SEARCH_LIMIT = 50
_ENTRY_ID = re.compile(r"[0-9]{1,18}")


def add_routes(ui: UiRoutes) -> None:
    pages = _MemoryPages(ui)
    ui.page("/memory", pages.index)
    ui.action("/memory/{id}/forget", pages.forget)


def _view_of(values: Any) -> tuple[str | None, str]:
    """The scope and query a view shows (from the query string or a form)."""
    scope = str(values.get("scope") or "").strip() or None
    return scope, str(values.get("q") or "").strip()


def _address(scope: str | None, query: str) -> str:
    params = {k: v for k, v in (("scope", scope), ("q", query)) if v}
    return "/ui/memory" + (f"?{urlencode(params)}" if params else "")


class _MemoryPages:
    def __init__(self, ui: UiRoutes) -> None:
        self._ui = ui

    async def _entries_html(
        self, request: web.Request, scope: str | None, query: str, notice: str | None = None
    ) -> str:
        problem = None
        async with self._ui.client() as client:
            try:
                if query:
                    entries = await client.search_memory(query, scope=scope, limit=_SEARCH_LIMIT)
                else:
                    entries = await client.memory(scope=scope, limit=_LIST_LIMIT)
            except ControlError as exc:
                if exc.status != 400:
                    raise
                entries, problem = [], str(exc)
        return render_text(
            request,
            "memory/_entries.html",
            entries=entries,
            scope=scope,
            query=query,
            problem=problem,
            notice=notice,
        )

    async def index(self, request: web.Request) -> web.Response:
        scope, query = _view_of(request.query)
        async with self._ui.client() as client:
            scopes = await client.memory_scopes()
        return render(
            request,
            "memory.html",
            title="Memory",
            scopes=scopes,
            scope=scope,
            query=query,
            entries_html=await self._entries_html(request, scope, query),
        )

    async def forget(self, request: web.Request) -> web.StreamResponse:
        raw = request.match_info["id"]
        if not _ENTRY_ID.fullmatch(raw):
            raise web.HTTPNotFound(text=f"no memory {raw[:40]!r}")
        scope, query = _view_of(await request.post())
        async with self._ui.client() as client:
            forgotten = await client.forget_memory(int(raw))
        notice = f"Forgot #{forgotten.get('id')}: {str(forgotten.get('text', ''))[:80]}"
        html = await self._entries_html(request, scope, query, notice=notice)
        fragment = web.Response(text=html, content_type="text/html")
        return after_action(request, redirect=_address(scope, query), fragment=fragment)
