"""The webhook routes: ``POST /webhook/{name}``, ``GET /webhook/{name}/messages/{id}``,
``GET /webhook/openapi.json``; every error is JSON ``{"error": "..."}``.

A request is checked in the order that costs least: hook, method, content type, size
(before the body is parsed), authentication (on the raw bytes), rate, the body's schema,
the callback URL (normalised, then matched), and last, in the publishing transaction,
that its signature was not accepted before (409: a replay). A refused request stores
nothing: it leaves a log line and a count.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from aiohttp import web
from pydantic import BaseModel, ValidationError

from channels.webhook.auth import REPLAY_WINDOW, Authenticated, TokenBucket, authenticate
from channels.webhook.callbacks import CallbackRefused, allowed_callback
from channels.webhook.config import HookConfig
from channels.webhook.models import (
    Accepted,
    MessageState,
    MessageStatusBody,
    ReplyBody,
    TimeoutBody,
    WebhookRequest,
)
from channels.webhook.openapi import openapi_document
from channels.webhook.render import reply_status, session_name, to_inbound
from channels.webhook.stats import WebhookStats
from core.bus.base import MessageStatus, OnceKey
from core.bus.sql import SqlBus

__all__ = ["WebhookApi"]

log = logging.getLogger(__name__)

_STATES: dict[str, MessageState] = {
    "pending": "pending",
    "claimed": "running",
    "done": "done",
    "failed": "failed",
}
_MAX_ID = 64
_JSON = "application/json"


class _Refused(Exception):
    """An answer other than success: its status, message and extra headers."""

    def __init__(self, status: int, error: str, headers: Mapping[str, str] | None = None) -> None:
        super().__init__(error)
        self.status = status
        self.error = error
        self.headers = dict(headers or {})


def _json(
    status: int, body: BaseModel | dict[str, Any], headers: Mapping[str, str] | None = None
) -> web.Response:
    data = body.model_dump(mode="json") if isinstance(body, BaseModel) else body
    return web.json_response(data, status=status, headers=headers)


def _describe(exc: ValidationError) -> str:
    """The first problem, naming its field (``text: ...``)."""
    error = exc.errors(include_url=False, include_input=False)[0]
    if error["type"] == "json_invalid":
        return f"invalid JSON: {error['msg'].removeprefix('Invalid JSON: ')}"
    where = ".".join(str(part) for part in error["loc"]) or "body"
    return f"{where}: {error['msg']}"


async def _read_body(request: web.Request, limit: int) -> bytes:
    """The raw body, refused (413) as soon as it is larger than ``limit`` bytes."""
    too_large = _Refused(413, f"body larger than {limit} bytes")
    if request.content_length is not None and request.content_length > limit:
        raise too_large
    # The gateway's body checks (gateway/http_errors.py) have read it already, within the
    # HTTP server's own 1 MiB limit; read() hands back those same bytes.
    body = await request.read()
    if len(body) > limit:
        raise too_large
    return body


class WebhookApi:
    """The HTTP side of the webhook channel; ``bus`` is None while the channel is stopped."""

    def __init__(
        self,
        *,
        hooks: Mapping[str, HookConfig],
        stats: WebhookStats,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._hooks = hooks
        self._stats = stats
        self._clock = clock
        self._buckets = {
            name: TokenBucket(rate=hook.rate, burst=hook.burst) for name, hook in hooks.items()
        }
        self.bus: SqlBus | None = None

    def add_routes(self, app: web.Application) -> None:
        """Route ``/webhook...`` here (once: the app is frozen when it serves)."""
        app.router.add_route("*", "/webhook/openapi.json", self._openapi)
        app.router.add_route("*", "/webhook/{name}", self._post)
        app.router.add_route("*", "/webhook/{name}/messages/{id}", self._get)
        app.router.add_route("*", r"/webhook{tail:(/[\s\S]*)?}", self._unknown)

    # -- handlers ------------------------------------------------------------------------

    async def _openapi(self, request: web.Request) -> web.Response:
        if request.method not in ("GET", "HEAD"):
            return self._refused("-", _Refused(405, "use GET", {"Allow": "GET"}))
        return web.json_response(openapi_document())

    async def _unknown(self, _request: web.Request) -> web.Response:
        return self._refused("-", _Refused(404, "not found"))

    async def _post(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        try:
            return await self._message(request, name)
        except _Refused as refused:
            return self._refused(name, refused)

    async def _get(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        try:
            return await self._status(request, name)
        except _Refused as refused:
            return self._refused(name, refused)

    # -- steps ---------------------------------------------------------------------------

    def _hook(self, name: str, request: web.Request, method: str) -> tuple[HookConfig, SqlBus]:
        hook = self._hooks.get(name)
        if hook is None:
            raise _Refused(404, "unknown hook")
        if request.method != method:
            raise _Refused(405, f"use {method}", {"Allow": method})
        if self.bus is None:
            raise _Refused(503, "the webhook channel is not running")
        return hook, self.bus

    def _authenticate(self, hook: HookConfig, request: web.Request, body: bytes) -> Authenticated:
        found = authenticate(hook, request.headers, body, now=self._clock())
        if isinstance(found, str):
            raise _Refused(401, found)
        return found

    async def _message(self, request: web.Request, name: str) -> web.Response:
        hook, bus = self._hook(name, request, "POST")
        if request.content_type != _JSON:
            raise _Refused(415, f"Content-Type must be {_JSON}")
        body = await _read_body(request, hook.max_body)
        signed = self._authenticate(hook, request, body)
        retry_after = self._buckets[name].take()
        if retry_after:
            raise _Refused(429, "rate limited", {"Retry-After": str(retry_after)})
        try:
            sent = WebhookRequest.model_validate_json(body)
        except ValidationError as exc:
            raise _Refused(400, _describe(exc)) from None
        if len(sent.text) > hook.max_text:
            raise _Refused(400, f"text: longer than {hook.max_text} characters")
        callback = _callback(sent.callback_url, hook)
        # A signature is good for MAX_SKEW either side of its timestamp: within that
        # window the same request, sent again by anyone who saw it, would run again. Not
        # scoped to the hook: the signature does not cover the path, so hooks sharing a
        # secret would otherwise each accept it once.
        once = None
        if signed.signature is not None:
            once = OnceKey(f"sha256={signed.signature}", REPLAY_WINDOW)
        published = await bus.publish_inbound(
            to_inbound(name, sent, callback, allow_approve=hook.allow_approve), once=once
        )
        if published.replayed:
            raise _Refused(
                409,
                "this signature was accepted already: a replay is refused; sign each "
                "request anew (a fresh timestamp) and retry with an idempotency_key",
            )
        message_id, session = published.message_id, sent.session
        if published.duplicate:
            first = await bus.message_status(message_id)
            session = session_name(first.session) if first is not None else session
            log.info("webhook retry of message_id=%s hook=%s", message_id, name)
        if not sent.wait:
            return self._answer(202, Accepted(message_id=message_id, session=session))
        reply = await bus.wait_reply(message_id, hook.wait_timeout)
        if reply is None:
            timeout = TimeoutBody(
                error=f"no reply within {hook.wait_timeout:g} s; poll for it", message_id=message_id
            )
            return self._answer(504, timeout)
        body_out = ReplyBody(
            message_id=message_id, session=session, reply=reply.text, status=reply_status(reply)
        )
        return self._answer(200, body_out)

    async def _status(self, request: web.Request, name: str) -> web.Response:
        hook, bus = self._hook(name, request, "GET")
        self._authenticate(hook, request, b"")  # a GET signs "{timestamp}." (empty body)
        message_id = request.match_info["id"]
        found = await bus.message_status(message_id) if len(message_id) <= _MAX_ID else None
        if found is None or not found.session.startswith(f"webhook:{name}:"):
            raise _Refused(404, "unknown message")
        return self._answer(200, _status_body(found))

    # -- answers -------------------------------------------------------------------------

    def _answer(self, status: int, body: BaseModel) -> web.Response:
        self._stats.request(status)
        return _json(status, body)

    def _refused(self, name: str, refused: _Refused) -> web.Response:
        hook = name if name in self._hooks else "-"
        self._stats.request(refused.status)
        log.info("webhook refused hook=%s status=%d: %s", hook, refused.status, refused.error)
        return _json(refused.status, {"error": refused.error}, refused.headers)


def _callback(url: str | None, hook: HookConfig) -> str | None:
    """The normal form of an allowed callback URL (what is POSTed to later).

    Raises:
        _Refused: 400 when it cannot be normalised or matches no ``callback_allow`` prefix.
    """
    if url is None:
        return None
    try:
        allowed = allowed_callback(url, hook.callback_allow)
    except CallbackRefused as exc:
        raise _Refused(400, f"callback_url: refused ({exc})") from None
    if allowed is None:
        raise _Refused(400, "callback_url: not allowed for this hook (see callback_allow)")
    return allowed


def _status_body(found: MessageStatus) -> MessageStatusBody:
    state = _STATES[found.status]
    reply = found.reply
    if reply is not None and state == "done":
        state = reply_status(reply)
    return MessageStatusBody(
        message_id=found.message_id,
        session=session_name(found.session),
        status=state,
        reply=reply.text if reply is not None and state in ("done", "failed") else None,
    )
