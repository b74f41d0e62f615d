"""The Schedules page: every active schedule with its next run in its own timezone,
creating one (``every`` / ``after`` / ``at`` / ``cron``, optional timezone) and
cancelling one.

Everything goes through the control API's schedule routes (``/v1/schedules``), which
check a new schedule with the slash commands' rules: a refused one is answered with
their message and nothing is created.
"""

from __future__ import annotations

import asyncio
import functools
import zoneinfo
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

from gateway.control.client import ControlError
from gateway.ui.polling import push_changes
from gateway.ui.render import is_async, render, render_text
from gateway.ui.routes import EventStream, UiRoutes, after_action
from gateway.ui.shown import clock_text

__all__ = ["KINDS", "ScheduleView", "add_routes"]

KINDS: tuple[tuple[str, str, str], ...] = (
    ("every", "every — repeat at an interval", "an interval such as 30m, 1h30m or 2d"),
    ("after", "after — once, after a delay", "a delay such as 20m or 3h"),
    ("at", "at — once, at a date and time", "a date and time such as 2026-12-24 18:00"),
    ("cron", "cron — a cron expression", "five fields such as 0 9 * * mon-fri"),
)
"""``(kind, label, what its spec is)`` as the form offers them."""
_FIELDS = ("kind", "spec", "timezone", "session", "prompt")
_DEFAULT_SESSION = "cli:default"


@dataclass(frozen=True, slots=True)
class ScheduleView:
    """An active schedule as the page shows it (the next run in its own timezone)."""

    id: int
    session: str
    kind: str
    spec: str
    timezone: str
    prompt: str
    next_run: str
    next_run_utc: str
    next_offset: str
    last_run: str
    run_count: int

    @classmethod
    def of(cls, row: dict[str, Any]) -> ScheduleView:
        local = row.get("next_run_local")
        last = row.get("last_run")
        next_run, next_utc, offset = "no further runs", "", ""
        if local:
            moment = datetime.fromisoformat(str(local))
            next_run = moment.strftime("%Y-%m-%d %H:%M")
            next_utc = moment.astimezone(UTC).isoformat()
            offset = "UTC" + moment.strftime("%z")[:3] + ":" + moment.strftime("%z")[3:]
        return cls(
            id=int(row["id"]),
            session=str(row["session"]),
            kind=str(row["kind"]),
            spec=_spec_text(row),
            timezone=str(row["timezone"]),
            prompt=str(row["prompt"]),
            next_run=next_run,
            next_run_utc=next_utc,
            next_offset=offset,
            last_run="never" if not last else clock_text(datetime.fromisoformat(str(last))),
            run_count=int(row.get("run_count") or 0),
        )


def _spec_text(row: dict[str, Any]) -> str:
    if row["kind"] == "at":
        return "once"
    return f"{row['kind']} {row['spec']}"


@functools.cache
def _zones() -> tuple[str, ...]:
    return tuple(sorted(zoneinfo.available_timezones()))


def add_routes(ui: UiRoutes) -> None:
    """``/ui/schedules`` (page), ``/ui/schedules/live`` (SSE), ``POST /ui/schedules``
    (create) and ``POST /ui/schedules/{id}/cancel``."""
    page = _SchedulesPage(ui)
    ui.page("/schedules", page.page)
    ui.stream("/schedules/live", page.live)
    ui.action("/schedules", page.create)
    ui.action("/schedules/{id:[0-9]{1,18}}/cancel", page.cancel)


class _SchedulesPage:
    def __init__(self, ui: UiRoutes) -> None:
        self._ui = ui

    async def _list(self) -> dict[str, Any]:
        async with self._ui.client() as client:
            found = await client.schedule_list()
        return {
            "schedules": [ScheduleView.of(row) for row in found.get("schedules", [])],
            "default_timezone": str(found.get("timezone") or "UTC"),
        }

    async def _form_context(self, values: dict[str, str]) -> dict[str, Any]:
        async with self._ui.client() as client:
            sessions = [str(s["key"]) for s in await client.sessions() if "key" in s]
        return {
            "kinds": KINDS,
            "zones": await asyncio.to_thread(_zones),
            "sessions": sessions,
            "values": values,
        }

    async def page(
        self,
        request: web.Request,
        *,
        values: dict[str, str] | None = None,
        error: str | None = None,
    ) -> web.Response:
        shown = values or {"kind": "every", "session": _DEFAULT_SESSION}
        return render(
            request,
            "schedules.html",
            status=200 if error is None else 400,
            title="Schedules",
            error=error,
            **await self._list(),
            **await self._form_context(shown),
        )

    async def live(self, request: web.Request, stream: EventStream) -> None:
        async def fragment() -> str:
            return render_text(request, "schedules/_list.html", **await self._list())

        def failed(why: str) -> str:
            return render_text(request, "schedules/_unavailable.html", why=why)

        await push_changes(stream, fragment, failed)

    async def create(self, request: web.Request) -> web.StreamResponse:
        form = await request.post()
        values = {name: str(form.get(name, "")).strip() for name in _FIELDS}
        try:
            async with self._ui.client() as client:
                created = await client.add_schedule(
                    kind=values["kind"],
                    spec=values["spec"],
                    prompt=values["prompt"],
                    session=values["session"] or _DEFAULT_SESSION,
                    timezone=values["timezone"] or None,
                )
        except ControlError as exc:
            if exc.status >= 500:
                raise
            if is_async(request):
                return web.Response(status=exc.status, text=f"Not created: {exc.reason}")
            return await self.page(request, values=values, error=exc.reason)
        view = ScheduleView.of(created)
        fragment = render(request, "schedules/_result.html", created=view, cancelled=None)
        return after_action(request, redirect="/ui/schedules", fragment=fragment)

    async def cancel(self, request: web.Request) -> web.StreamResponse:
        try:
            async with self._ui.client() as client:
                cancelled = await client.cancel_schedule(int(request.match_info["id"]))
        except ControlError as exc:
            if exc.status >= 500:
                raise
            return web.Response(status=exc.status, text=f"Not cancelled: {exc.reason}")
        view = ScheduleView.of(cancelled)
        fragment = render(request, "schedules/_result.html", created=None, cancelled=view)
        return after_action(request, redirect="/ui/schedules", fragment=fragment)
