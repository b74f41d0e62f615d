"""The Chat page: the operator's own ``ui:NAME`` sessions, replies streamed as they come.

- ``GET /ui/chat?s=NAME``: the sessions of the ``ui`` channel, and session NAME's
  conversation (turns with their tool-call and subagent steps); its unread replies
  are marked new (a GET changes nothing: **Mark read** or sending marks them read).
- ``POST /ui/chat/send`` (``session``, ``text``; ``do=stop`` sends ``/stop``): sends
  through the control API as the logged-in operator (`LiveTurns`) and answers the
  conversation with the new turn, whose element follows ``/ui/chat/live/<turn>``.
- ``GET /ui/chat/live/<turn>`` (SSE): the turn re-rendered on every delta, progress note
  and step; ``close`` once the reply is there.
- ``GET /ui/chat/watch?s=NAME`` (SSE): replies nobody waited for (a schedule firing in
  the session) are appended as they arrive.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncGenerator
from typing import Any
from urllib.parse import quote

from aiohttp import web

from core.session_keys import UI_PREFIX, ui_key
from gateway.control.client import ControlClient, ControlError
from gateway.control.protocol import ReplyLine
from gateway.ui.chat_live import LiveTurn, LiveTurns
from gateway.ui.markdown import reply_html
from gateway.ui.render import render, render_text, session_of
from gateway.ui.routes import EventStream, UiRoutes, after_action
from gateway.ui.transcript import SHOWN_TURNS, Turn, turns_of

__all__ = ["add_routes", "transcript_context", "transcript_items", "when"]

_DEFAULT_NAME = "main"
_KEEPALIVE = 15.0
"""Seconds between keepalive comments on a quiet event stream."""
_FRAME = 0.1
"""Seconds between two renderings of a reply being written (each renders all of it)."""
_MAX_TEXT = 100_000
"""The longest message the page sends (characters)."""


def when(at: float) -> str:
    """A timestamp as the panel shows it (the gateway's local time)."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(at)) if at else ""


def transcript_items(
    detail: dict[str, Any], live: list[LiveTurn]
) -> list[tuple[str, Turn | LiveTurn]]:
    """A session's turns from its history, and the page's own turns in flight (or ended
    without a trace in the history, like a slash command's answer), by time."""
    running = {t.message_id for t in live if not t.ended}
    turns = turns_of(detail.get("history", []), detail.get("events", []))
    stored = {t.message_id for t in turns}
    items: list[tuple[float, str, Turn | LiveTurn]] = [
        (t.at, "turn", t) for t in turns if t.message_id not in running
    ]
    items += [
        (t.started, "live", t)
        for t in live
        if not t.ended or t.message_id is None or t.message_id not in stored
    ]
    items.sort(key=lambda item: item[0])
    return [(kind, item) for _at, kind, item in items]


def transcript_context(detail: dict[str, Any], live: list[LiveTurn], key: str) -> dict[str, Any]:
    """What ``chat/_transcript.html`` shows of session ``key``: its newest `SHOWN_TURNS`
    items (`transcript_items`) and how many older ones it leaves out."""
    items = transcript_items(detail, live)
    return {
        "items": items[-SHOWN_TURNS:],
        "older_turns": max(0, len(items) - SHOWN_TURNS),
        "key": key,
        "md": reply_html,
        "when": when,
        "user_label": "You",
    }


class _ChatPage:
    def __init__(self, ui: UiRoutes) -> None:
        self._ui = ui
        self._turns = LiveTurns(ui.client)

    async def page(self, request: web.Request) -> web.Response:
        name = request.query.get("s", "").strip()
        problem = None
        async with self._ui.client() as client:
            listed = (await client.find_sessions(channel="ui", limit=200))["sessions"]
            if not name:
                name = listed[0]["key"].removeprefix(UI_PREFIX) if listed else _DEFAULT_NAME
            try:
                key = ui_key(name)
            except ValueError as exc:
                problem, name, key = str(exc), _DEFAULT_NAME, ui_key(_DEFAULT_NAME)
            detail = await _detail(client, key)
        unread = [int(u["id"]) for u in detail.get("unread", [])]
        sessions = [
            {**s, "name": s["key"].removeprefix(UI_PREFIX), "when": when(s["updated_at"])}
            for s in listed
        ]
        return render(
            request,
            "chat.html",
            title="Chat",
            name=name,
            sessions=sessions,
            problem=problem,
            unread_upto=max(unread) if unread else None,
            **self._transcript_context(detail, key),
        )

    def _transcript_context(self, detail: dict[str, Any], key: str) -> dict[str, Any]:
        return transcript_context(detail, self._turns.of_session(key), key)

    async def send(self, request: web.Request) -> web.StreamResponse:
        form = await request.post()
        name, text = str(form.get("session", "")), str(form.get("text", ""))
        try:
            key = ui_key(name)
        except ValueError as exc:
            return web.Response(status=400, text=str(exc))
        if form.get("do") == "stop":
            text = "/stop"
        if not text.strip():
            return web.Response(status=400, text="type a message first")
        if len(text) > _MAX_TEXT:
            return web.Response(status=413, text=f"a message is at most {_MAX_TEXT:,} characters")
        read_upto = str(form.get("read_upto", ""))
        if read_upto.isdigit():  # the replies the page showed as new: answered, so read
            async with self._ui.client() as client:
                await client.mark_read(key, upto=int(read_upto))
        turn = await self._turns.start(key, text, session_of(request).operator)
        if turn.message_id is None and turn.problem is not None:
            return web.Response(status=503, text=f"not sent: {turn.problem}")
        async with self._ui.client() as client:
            detail = await _detail(client, key)
        fragment = render(request, "chat/_transcript.html", **self._transcript_context(detail, key))
        return after_action(request, redirect=f"/ui/chat?s={quote(name)}", fragment=fragment)

    async def live(self, request: web.Request, stream: EventStream) -> None:
        turn = self._turns.get(request.match_info["turn"])
        if turn is None:
            await stream.send("replace", render_text(request, "chat/_gone.html"))
            await stream.send("close")
            return
        seen = -1
        while True:
            if turn.version != seen:
                seen = turn.version
                html = render_text(request, "chat/_live.html", turn=turn, md=reply_html)
                await stream.send("replace", html)
                if turn.ended:
                    await stream.send("close")
                    return
                # The deltas of the next tenth of a second go into one rendering.
                await asyncio.sleep(_FRAME)
            try:
                async with asyncio.timeout(_KEEPALIVE):
                    await turn.changed(seen)
            except TimeoutError:
                await stream.keepalive()

    async def watch(self, request: web.Request, stream: EventStream) -> None:
        try:
            key = ui_key(request.query.get("s", ""))
        except ValueError:
            await stream.send("close")
            return
        async with self._ui.client() as client:
            replies = client.watch(key)
            async with _pumped(replies) as queue:
                while True:
                    try:
                        async with asyncio.timeout(_KEEPALIVE):
                            reply = await queue.get()
                    except TimeoutError:
                        await stream.keepalive()
                        continue
                    if reply is None:  # the gateway is stopping
                        await stream.send("close")
                        return
                    html = render_text(request, "chat/_arrived.html", reply=reply, md=reply_html)
                    await stream.send("append", html)


async def _detail(client: ControlClient, key: str) -> dict[str, Any]:
    """The session with its history and events; empty while it does not exist yet."""
    try:
        return await client.session(key, events=True)
    except ControlError as exc:
        if exc.status == 404:
            return {}
        raise


@contextlib.asynccontextmanager
async def _pumped(
    replies: AsyncGenerator[ReplyLine, None],
) -> AsyncGenerator[asyncio.Queue[ReplyLine | None], None]:
    """The replies through a queue (a None when they end), read by a task of its own: the
    stream can then send keepalives, and notices a browser that left, between replies."""
    queue: asyncio.Queue[ReplyLine | None] = asyncio.Queue()

    async def pump() -> None:
        try:
            async with contextlib.aclosing(replies):
                async for reply in replies:
                    queue.put_nowait(reply)
        finally:
            queue.put_nowait(None)

    task = asyncio.create_task(pump())
    try:
        yield queue
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task


def add_routes(ui: UiRoutes) -> None:
    chat = _ChatPage(ui)
    ui.page("/chat", chat.page)
    ui.action("/chat/send", chat.send)
    ui.stream("/chat/live/{turn}", chat.live)
    ui.stream("/chat/watch", chat.watch)
