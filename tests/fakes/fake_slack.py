"""A Slack stand-in on loopback: the Web API methods the channel calls, a Socket Mode
WebSocket server, file downloads, and signed Events API requests for the http mode.

Every Web API call is recorded (``calls``) with its time; tests wait on them.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import itertools
import json
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import yaml
from aiohttp import web

from tests.fakes.loopback import LoopbackServer

__all__ = ["ALL_SCOPES", "Call", "FakeSlack", "event_body", "sign"]

ALL_SCOPES = ",".join(
    yaml.safe_load((Path(__file__).parents[2] / "channels/slack/manifest.yaml").read_text())[
        "oauth_config"
    ]["scopes"]["bot"]
)
"""What ``auth.test`` reports by default: the scopes an install from the app manifest has."""


@dataclass(frozen=True)
class Call:
    """One Web API call: method, arguments (JSON, form or query), token, when."""

    method: str
    args: dict[str, Any]
    token: str
    at: float


def sign(secret: str, body: str, timestamp: int | None = None) -> dict[str, str]:
    """The headers Slack signs an Events API request with."""
    ts = str(int(time.time()) if timestamp is None else timestamp)
    digest = hmac.new(secret.encode(), f"v0:{ts}:{body}".encode(), hashlib.sha256).hexdigest()
    return {
        "X-Slack-Request-Timestamp": ts,
        "X-Slack-Signature": f"v0={digest}",
        "Content-Type": "application/json",
    }


def event_body(
    event: dict[str, Any], *, team: str = "T1", event_id: str | None = None
) -> dict[str, Any]:
    """An ``event_callback`` envelope around ``event``."""
    return {
        "token": "legacy",
        "team_id": team,
        "api_app_id": "A1",
        "type": "event_callback",
        "event_id": event_id or f"Ev{uuid.uuid4().hex[:10].upper()}",
        "event_time": int(time.time()),
        "event": {"team": team, **event},
    }


@dataclass(kw_only=True)
class FakeSlack(LoopbackServer):
    """The Slack Web API under ``/api/``, Socket Mode on ``/ws``, files under ``/files/``.

    Attributes:
        bot_token: the bot token it accepts (others get ``invalid_auth``).
        app_token: the app-level token ``apps.connections.open`` accepts.
        scopes: what ``auth.test`` reports in ``X-OAuth-Scopes``.
        assistant: whether ``assistant.threads.setStatus`` works (else ``missing_scope``).
        streaming: whether ``chat.startStream`` works (else ``unknown_method``, what an
            app that cannot stream gets).
        fail: method -> how many of its next calls fail (after ``fail_after`` successes)
            with ``internal_error``.
        fail_after: method -> how many of its calls succeed before ``fail`` applies.
        rate_limit: method -> how many of its next calls get 429 (``Retry-After``).
        retry_after: the ``Retry-After`` of those 429s, in seconds.
        files: file path -> content served under ``/files/`` (bot token required).
        api_calls: every Web API call, in order.
        messages: ts -> what the bot's message shows now (posts, edits, streams).
        streaming_ts: the streamed messages not yet stopped.
        acks: envelope id -> seconds from sending the envelope to its ack.
        socket_closed: set when the Socket Mode connection closes after opening.
    """

    bot_token: str = "xoxb-fake"
    app_token: str = "xapp-fake"
    team: str = "T1"
    bot_user: str = "UBOT"
    bot_id: str = "BBOT"
    scopes: str = ALL_SCOPES
    assistant: bool = False
    streaming: bool = False
    fail: dict[str, int] = field(default_factory=dict)
    fail_after: dict[str, int] = field(default_factory=dict)
    rate_limit: dict[str, int] = field(default_factory=dict)
    retry_after: int = 1
    files: dict[str, bytes] = field(default_factory=dict)
    api_calls: list[Call] = field(default_factory=list, init=False)
    messages: dict[str, dict[str, Any]] = field(default_factory=dict, init=False)
    streaming_ts: set[str] = field(default_factory=set, init=False)
    acks: dict[str, float] = field(default_factory=dict, init=False)
    socket_closed: asyncio.Event = field(default_factory=asyncio.Event, init=False)
    socket_open: asyncio.Event = field(default_factory=asyncio.Event, init=False)
    _ts: itertools.count[int] = field(default_factory=lambda: itertools.count(1), init=False)
    _changed: asyncio.Condition = field(default_factory=asyncio.Condition, init=False)
    _ws: web.WebSocketResponse | None = field(default=None, init=False)
    _pending: dict[str, tuple[float, asyncio.Future[dict[str, Any]]]] = field(
        default_factory=dict, init=False
    )

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/api/"

    def file_url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}/files/{path}"

    def routes(self, app: web.Application) -> None:
        app.router.add_route("*", "/api/{method}", self._api)
        app.router.add_get("/ws", self._socket)
        app.router.add_get("/files/{path:.*}", self._file)

    # -- what tests ask ------------------------------------------------------------------

    def of(self, method: str, **match: Any) -> list[Call]:
        """The calls of ``method`` whose arguments include ``match``."""
        return [
            c
            for c in self.api_calls
            if c.method == method and all(c.args.get(k) == v for k, v in match.items())
        ]

    def posts(self, **match: Any) -> list[Call]:
        return self.of("chat.postMessage", **match)

    def thread(self, thread_ts: str) -> list[str]:
        """What the bot's messages in thread ``thread_ts`` show now, oldest first."""
        return [m["text"] for m in self.messages.values() if m.get("thread_ts") == thread_ts]

    async def wait_for(
        self, method: str, count: int = 1, timeout: float = 30.0, **match: Any
    ) -> list[Call]:
        """Wait until ``count`` calls of ``method`` matching ``match`` arrived."""
        async with asyncio.timeout(timeout), self._changed:
            await self._changed.wait_for(lambda: len(self.of(method, **match)) >= count)
        return self.of(method, **match)

    def new_ts(self) -> str:
        return f"{1_700_000_000 + next(self._ts)}.000100"

    # -- Web API -------------------------------------------------------------------------

    async def _api(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        args: dict[str, Any] = dict(request.query)
        if request.content_type == "application/json":
            args.update(await request.json())
        elif request.can_read_body:
            args.update(await request.post())
        token = request.headers.get("Authorization", "").removeprefix("Bearer ")
        token = token or str(args.get("token", ""))
        await self._record(Call(method, args, token, time.monotonic()))
        if self.rate_limit.get(method, 0) > 0:
            self.rate_limit[method] -= 1
            headers = {"Retry-After": str(self.retry_after)}
            return web.json_response(
                {"ok": False, "error": "ratelimited"}, status=429, headers=headers
            )
        if self.fail.get(method, 0) > 0:
            if self.fail_after.get(method, 0) > 0:
                self.fail_after[method] -= 1
            else:
                self.fail[method] -= 1
                return web.json_response({"ok": False, "error": "internal_error"})
        if method == "apps.connections.open":
            if token != self.app_token:
                return web.json_response({"ok": False, "error": "invalid_auth"})
            return web.json_response({"ok": True, "url": f"ws://127.0.0.1:{self.port}/ws"})
        if token != self.bot_token:
            return web.json_response({"ok": False, "error": "invalid_auth"})
        return self._answer(method, args)

    def _answer(self, method: str, args: dict[str, Any]) -> web.Response:
        if method == "auth.test":
            body = {
                "ok": True,
                "url": "https://fake.slack.com/",
                "team": "Fake",
                "user": "familiar",
                "team_id": self.team,
                "user_id": self.bot_user,
                "bot_id": self.bot_id,
            }
            return web.json_response(body, headers={"X-OAuth-Scopes": self.scopes})
        if method.startswith("chat."):
            return self._message(method, args)
        if method == "assistant.threads.setStatus":
            if not self.assistant:
                error = {"ok": False, "error": "missing_scope", "needed": "assistant:write"}
                return web.json_response(error)
            return web.json_response({"ok": True})
        if method == "files.info":
            return web.json_response({"ok": True, "file": {"id": args.get("file")}})
        return web.json_response({"ok": False, "error": "unknown_method"})

    def _message(self, method: str, args: dict[str, Any]) -> web.Response:
        """The ``chat.*`` methods, kept in `messages`."""
        if method in ("chat.postMessage", "chat.startStream"):
            if method == "chat.startStream" and not self.streaming:
                return web.json_response({"ok": False, "error": "unknown_method"})
            ts = self.new_ts()
            text = args.get("text") if method == "chat.postMessage" else args.get("markdown_text")
            self.messages[ts] = {
                "channel": args.get("channel"),
                "thread_ts": args.get("thread_ts"),
                "text": text or "",
            }
            if method == "chat.startStream":
                self.streaming_ts.add(ts)
            return web.json_response({"ok": True, "channel": args.get("channel"), "ts": ts})
        if method in ("chat.appendStream", "chat.stopStream"):
            ts = str(args.get("ts"))
            if ts not in self.streaming_ts:
                return web.json_response({"ok": False, "error": "message_not_in_streaming_state"})
            self.messages[ts]["text"] += args.get("markdown_text") or ""
            if method == "chat.stopStream":
                self.streaming_ts.discard(ts)
            return web.json_response({"ok": True, "channel": args.get("channel"), "ts": ts})
        if method in ("chat.update", "chat.delete"):
            ts = str(args["ts"])
            if ts not in self.messages:
                return web.json_response({"ok": False, "error": "message_not_found"})
            if method == "chat.delete":
                del self.messages[ts]
            else:
                self.messages[ts]["text"] = args.get("text") or ""
            return web.json_response({"ok": True, "channel": args.get("channel"), "ts": ts})
        return web.json_response({"ok": False, "error": "unknown_method"})

    async def _record(self, call: Call) -> None:
        async with self._changed:
            self.api_calls.append(call)
            self._changed.notify_all()

    async def _file(self, request: web.Request) -> web.Response:
        if request.headers.get("Authorization") != f"Bearer {self.bot_token}":
            return web.Response(status=302, headers={"Location": "https://fake.slack.com/login"})
        content = self.files.get(request.match_info["path"])
        if content is None:
            return web.Response(status=404)
        return web.Response(body=content, content_type="text/plain")

    # -- Socket Mode ---------------------------------------------------------------------

    async def _socket(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(autoping=True)
        await ws.prepare(request)
        self._ws = ws
        self.socket_closed.clear()
        await ws.send_json({"type": "hello", "num_connections": 1, "debug_info": {}})
        self.socket_open.set()
        try:
            async for frame in ws:
                if frame.type != aiohttp.WSMsgType.TEXT:
                    continue
                ack = json.loads(frame.data)
                pending = self._pending.pop(str(ack.get("envelope_id")), None)
                if pending is not None:
                    sent, future = pending
                    self.acks[str(ack["envelope_id"])] = time.monotonic() - sent
                    if not future.done():
                        future.set_result(ack)
        finally:
            if self._ws is ws:
                self._ws = None
                self.socket_open.clear()
                self.socket_closed.set()
                for _, future in self._pending.values():
                    if not future.done():
                        future.set_exception(ConnectionError("socket closed"))
        return ws

    async def envelope(
        self,
        kind: str,
        payload: dict[str, Any],
        *,
        envelope_id: str | None = None,
        retry_attempt: int = 0,
        timeout: float = 10.0,
    ) -> dict[str, Any]:
        """Send a Socket Mode envelope (``events_api``, ``slash_commands``); its ack."""
        await asyncio.wait_for(self.socket_open.wait(), timeout)
        ws = self._ws
        if ws is None:
            raise ConnectionError("no socket mode connection")
        envelope_id = envelope_id or uuid.uuid4().hex
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[envelope_id] = (time.monotonic(), future)
        await ws.send_json(
            {
                "envelope_id": envelope_id,
                "type": kind,
                "payload": payload,
                "accepts_response_payload": kind != "events_api",
                "retry_attempt": retry_attempt,
                "retry_reason": "timeout" if retry_attempt else "",
            }
        )
        return await asyncio.wait_for(future, timeout)
