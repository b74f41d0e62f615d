"""The Sessions page (a placeholder until it is built)."""

from __future__ import annotations

from aiohttp import web

from gateway.ui.render import render
from gateway.ui.routes import UiRoutes

__all__ = ["add_routes"]


def add_routes(ui: UiRoutes) -> None:
    ui.page("/sessions", _page)


async def _page(request: web.Request) -> web.Response:
    return render(request, "placeholder.html", title="Sessions")
