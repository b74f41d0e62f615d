"""The Sessions page: every session of every channel, newest first, and one session's
conversation and event log.

- ``GET /ui/sessions?channel=C&q=TEXT&key=KEY``: the list (``GET /v1/sessions``: one
  channel's, those whose key or messages contain TEXT), sessions with replies nobody
  saw yet marked unread; with ``key``, that session's turns (steps and all) and its
  event log.
- ``POST /ui/sessions/read`` (``key``, ``upto``): marks the session's unread replies read.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from aiohttp import web

from core.session_keys import UI_PREFIX, check_session_key
from gateway.control.client import ControlError
from gateway.ui.markdown import reply_html
from gateway.ui.pages.chat import when
from gateway.ui.render import render
from gateway.ui.routes import UiRoutes, after_action
from gateway.ui.transcript import SHOWN_EVENTS, SHOWN_TURNS, event_rows, turns_of

__all__ = ["add_routes", "session_context"]

_LISTED = 300
"""Sessions the page lists at most (the newest)."""


class _SessionsPage:
    def __init__(self, ui: UiRoutes) -> None:
        self._ui = ui

    async def page(self, request: web.Request) -> web.Response:
        query = request.query
        channel = query.get("channel", "").strip() or None
        text = query.get("q", "").strip() or None
        key = query.get("key", "").strip() or None
        problem = None
        if key is not None:
            try:
                check_session_key(key)
            except ValueError as exc:
                problem, key = str(exc), None
        async with self._ui.client() as client:
            found = await client.find_sessions(
                channel=channel or "", query=text or "", limit=_LISTED
            )
            detail = None
            if key is not None:
                try:
                    detail = await client.session(key, events=True)
                except ControlError as exc:
                    if exc.status != 404:
                        raise
                    problem = f"there is no session {key}"
        filters = {k: v for k, v in (("channel", channel), ("q", text)) if v}
        sessions = [
            {
                **s,
                "when": when(s["updated_at"]),
                "href": "/ui/sessions?" + urlencode({**filters, "key": s["key"]}),
            }
            for s in found["sessions"]
        ]
        return render(
            request,
            "sessions.html",
            title="Sessions",
            sessions=sessions,
            listed_max=_LISTED,
            channels=found.get("channels", []),
            channel=channel or "",
            q=text or "",
            problem=problem,
            here="/ui/sessions?" + urlencode({**filters, **({"key": key} if key else {})}),
            **session_context(detail),
        )

    async def read(self, request: web.Request) -> web.StreamResponse:
        form = await request.post()
        key, back = str(form.get("key", "")), str(form.get("back", ""))
        try:
            check_session_key(key)
            upto = int(str(form.get("upto", "")))
        except ValueError as exc:
            return web.Response(status=400, text=f"bad request: {exc}")
        async with self._ui.client() as client:
            await client.mark_read(key, upto=upto)
        if not back.startswith(("/ui/sessions", "/ui/chat?")):
            back = "/ui/sessions"
        return after_action(request, redirect=back)


def session_context(detail: dict[str, Any] | None) -> dict[str, Any]:
    """What ``sessions.html`` shows of one session (``GET /v1/sessions/{key}?events=1``):
    its newest `SHOWN_TURNS` turns and `SHOWN_EVENTS` events, and how many are left out."""
    if detail is None:
        return {"detail": None}
    info = detail["session"]
    unread = [int(u["id"]) for u in detail.get("unread", [])]
    history, events = detail.get("history", []), detail.get("events", [])
    key = str(info["key"])
    turns = turns_of(history, events)
    return {
        "detail": info,
        "turns": turns[-SHOWN_TURNS:],
        "older_turns": max(0, len(turns) - SHOWN_TURNS),
        "events": event_rows(list(reversed(events))[:SHOWN_EVENTS]),
        "older_events": max(0, len(events) - SHOWN_EVENTS),
        "unread_upto": max(unread) if unread else None,
        "chat_name": key.removeprefix(UI_PREFIX) if key.startswith(UI_PREFIX) else None,
        "md": reply_html,
        "when": when,
        "user_label": "You" if key.startswith(UI_PREFIX) else "User",
    }


def add_routes(ui: UiRoutes) -> None:
    page = _SessionsPage(ui)
    ui.page("/sessions", page.page)
    ui.action("/sessions/read", page.read)
