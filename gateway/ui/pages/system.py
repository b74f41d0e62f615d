"""The System page: the gateway's processes (live), store, channels and their
credentials, MCP servers and their tools, hooks, agents, skills, workspace trust (with
a "trust this file" action) and recent errors."""

from __future__ import annotations

import asyncio
import re
from html import escape
from typing import Any

from aiohttp import web

from gateway.masking import MASK
from gateway.ui.polling import push_changes
from gateway.ui.render import render, render_text
from gateway.ui.routes import EventStream, UiRoutes, after_action

__all__ = ["add_routes", "channel_rows"]

_CREDENTIAL = re.compile(r"(token|secret|password|api_key|app_password|client_secret)$")


def add_routes(ui: UiRoutes) -> None:
    page = _SystemPage(ui)
    ui.page("/system", page.page)
    ui.stream("/system/live", page.live)
    ui.action("/system/trust", page.trust)


def channel_rows(status: dict[str, Any], config: dict[str, Any]) -> list[dict[str, Any]]:
    """Each channel: its state in the running gateway and whether each credential of
    its ``[channels.<name>]`` table is set (values are never shown: they come masked)."""
    running = {str(c.get("name")): c for c in status.get("channels") or []}
    tables = config.get("channels") or {}
    names = [*running, *(n for n in tables if n not in running)]
    rows = []
    for name in names:
        table = tables.get(name)
        credentials = []
        if isinstance(table, dict):
            for key, value in table.items():
                if value == MASK or (value is None and _CREDENTIAL.search(key)):
                    credentials.append({"name": key, "set": value == MASK})
        found = running.get(name, {})
        enabled = not isinstance(table, dict) or table.get("enabled", True) is not False
        rows.append(
            {
                "name": name,
                "state": found.get("state") or ("not running" if enabled else "disabled"),
                "error": found.get("error"),
                "restarts": found.get("restarts") or 0,
                "credentials": credentials,
            }
        )
    return rows


class _SystemPage:
    def __init__(self, ui: UiRoutes) -> None:
        self._ui = ui

    async def _processes(self) -> list[dict[str, Any]]:
        async with self._ui.client() as client:
            status = await client.status()
        return list(status["processes"])

    async def page(self, request: web.Request) -> web.Response:
        async with self._ui.client() as client:
            status, system, config = await asyncio.gather(
                client.status(), client.system(), client.config()
            )
        processes = status["processes"]
        return render(
            request,
            "system.html",
            title="System",
            gateway=status,
            processes=processes,
            system=system,
            channels=channel_rows(status, config),
        )

    async def live(self, request: web.Request, stream: EventStream) -> None:
        """The process table, sent again whenever it changes."""

        async def fragment() -> str:
            return render_text(request, "system/_processes.html", processes=await self._processes())

        def failed(why: str) -> str:
            return f'<p class="error" role="alert">{escape(why)}</p>'

        await push_changes(stream, fragment, failed)

    async def trust(self, request: web.Request) -> web.StreamResponse:
        form = await request.post()
        path, fingerprint = form.get("path"), form.get("fingerprint")
        if not (isinstance(path, str) and path and isinstance(fingerprint, str) and fingerprint):
            return web.Response(status=400, text="path and fingerprint are required")
        async with self._ui.client() as client:
            await client.trust_allow(path, fingerprint)
            system = await client.system()
        fragment = render(request, "system/_trust.html", trust=system["trust"], trusted=path)
        return after_action(request, redirect="/ui/system#trust", fragment=fragment)
