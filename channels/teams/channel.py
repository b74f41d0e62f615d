"""The Teams channel: the Agents SDK on ``POST /api/messages``, replies sent proactively."""

from __future__ import annotations

import logging
import warnings
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web
from microsoft_agents.activity import Activity, ActivityTypes, ConversationReference
from microsoft_agents.authentication.msal import MsalAuth
from microsoft_agents.hosting.aiohttp import jwt_authorization_middleware
from microsoft_agents.hosting.core import ClaimsIdentity, MessageFactory, TurnContext

from channels.base import ChannelContext
from channels.teams.config import ROUTE, TeamsConfig
from channels.teams.indicator import Typing
from channels.teams.intake import Incoming, allowed, from_activity, reference_of, to_inbound
from channels.teams.live import LiveText
from channels.teams.render import error_line, split
from channels.teams.sdk import (
    AUTHENTICATED,
    TeamsError,
    TeamsSdk,
    TokenProviderFactory,
    check_credentials,
    is_loopback,
    token_refusals,
)
from core.errors import StoreError
from core.messages import Delivery, OutboundMessage, new_message_id

__all__ = ["REFUSAL", "STORE_REFUSAL", "TeamsChannel"]

log = logging.getLogger(__name__)

REFUSAL = "Sorry, I'm not set up to talk with you here. Ask my owner to add you."
STORE_REFUSAL = (
    "Sorry, I can't take messages right now: my storage is full or failing. "
    "Please send that again in a few minutes."
)
"""The one reply a user or tenant outside the allow-lists gets."""
_MEMORY = 10_000
"""How many refused activities and parts sent are remembered (oldest forgotten first)."""


class _Recent(OrderedDict[str, Any]):
    """A bounded mapping: the oldest entries go once it holds ``_MEMORY``."""

    def remember(self, key: str, value: Any = None) -> None:
        self[key] = value
        self.move_to_end(key)
        while len(self) > _MEMORY:
            self.popitem(last=False)


class TeamsChannel:
    """Teams conversations on the bus: 1:1 chats, group chats and channel threads.

    An activity passes the SDK's JWT check, is published durably (its conversation and
    activity id are the bus's dedupe id) and acknowledged at once: the SDK answers 202
    only after the handler returns, so the handler never waits for the agent. The
    reply is sent later through the conversation reference stored in the message's
    delivery, so it also reaches the conversation after a restart (schedules, check-ins).

    Args:
        config: the ``[channels.teams]`` table.
        tokens: makes the token provider (default: the SDK's MSAL, Entra ID).
        typing_after: show the typing indicator once a reply has taken this long (a
            quick reply needs none; acknowledging comes first); in a 1:1 chat, show the
            streamed text once it has streamed this long.
        stream_interval: the shortest time between two edits of the streamed text
            (None: no streamed text, only the final reply).
    """

    name = "teams"

    def __init__(
        self,
        *,
        config: TeamsConfig,
        tokens: TokenProviderFactory = MsalAuth,
        typing_after: float = 1.0,
        stream_interval: float | None = 1.0,
    ) -> None:
        self.config = config
        self._typing_after = typing_after
        self._stream_interval = stream_interval
        self._sdk = TeamsSdk.build(config, tokens=tokens)  # a bad setting fails here: exit 78
        self._running = False
        self._routes_added = False
        self._context: ChannelContext | None = None
        self._typing: dict[str, Typing] = {}
        self._live: dict[str, LiveText] = {}
        self._placeholders: _Recent = _Recent()
        self._refused: _Recent = _Recent()
        self._sent_parts: _Recent = _Recent()

    @classmethod
    def from_config(cls, config: TeamsConfig) -> TeamsChannel:
        return cls(config=config)

    # -- lifecycle -----------------------------------------------------------------------

    async def start(self, context: ChannelContext) -> None:
        """Serve ``POST /api/messages``; check the credentials (token acquisition).

        Raises:
            TeamsError: no HTTP server, anonymous mode off loopback, or no token (the
                gateway reports it and retries; the rest of the gateway serves).
        """
        if context.http is None:
            raise TeamsError("the teams channel needs the gateway's HTTP server ([http] enabled)")
        if not self._routes_added:  # before anything can fail: the app freezes
            prefix, _, _ = ROUTE.rpartition("/")
            context.http.add_subapp(prefix, self._http_app())
            self._routes_added = True
        cfg = self.config
        if cfg.anonymous and not is_loopback(context.http_host):
            log.error(
                "REFUSED: channels.teams.anonymous = true accepts unauthenticated requests; "
                "it is only allowed while http.host is a loopback address (it is %s)",
                context.http_host,
            )
            raise TeamsError(
                f"anonymous mode is refused: http.host {context.http_host} is not loopback"
            )
        if cfg.anonymous:
            log.warning(
                "channels.teams.anonymous = true: activities are accepted WITHOUT a token "
                "(local tests only)"
            )
        else:
            await check_credentials(self._sdk)
        if not cfg.check_service_url:
            log.warning("channels.teams.service_url_allow has '*': any serviceUrl is accepted")
        self._context = context
        self._running = True
        log.info("teams ready on %s app_id=%s", ROUTE, cfg.app_id or "(anonymous)")

    async def probe(self) -> str:
        """Acquire a token with the configured credentials (``familiar doctor``).

        Raises:
            TeamsError: no token; the message says which setting is wrong.
        """
        if self.config.anonymous:
            return "anonymous mode: no credentials (local tests only)"
        await check_credentials(self._sdk)
        return f"token acquired for app {self.config.app_id}"

    async def stop(self) -> None:
        """Stop answering; typing indicators stop. Idempotent."""
        self._running = False
        typing, self._typing = list(self._typing.values()), {}
        for indicator in typing:
            await indicator.stop()
        lives, self._live = list(self._live.values()), {}
        for live in lives:
            await live.finish()
        self._context = None

    def _http_app(self) -> web.Application:
        app = web.Application(middlewares=[token_refusals, jwt_authorization_middleware])
        with warnings.catch_warnings():  # the SDK's middleware reads this str key
            warnings.simplefilter("ignore", web.NotAppKeyWarning)
            app["agent_configuration"] = self._sdk.auth
        app.router.add_post("/" + ROUTE.rpartition("/")[2], self._http_messages)
        return app

    # -- inbound -------------------------------------------------------------------------

    async def _http_messages(self, request: web.Request) -> web.StreamResponse:
        request[AUTHENTICATED] = True  # the SDK's middleware let it through
        if not self._running:
            return web.json_response({"error": "the teams channel is not running"}, status=503)
        if self.config.anonymous and (why := _not_local(request)) is not None:
            log.warning("teams anonymous mode: refused a request that is not local (%s)", why)
            return web.json_response(
                {"error": f"anonymous mode accepts local requests only ({why})"}, status=403
            )
        response = await self._sdk.adapter.process(request, self)
        assert response is not None
        return response

    async def on_turn(self, context: TurnContext) -> None:
        """The SDK's agent entry point: one inbound activity (before its 202)."""
        incoming = from_activity(context.activity)
        if incoming is None:
            return
        if not allowed(incoming, self.config):
            await self._refuse(context, incoming)
            return
        try:
            await self._publish(incoming)
        except StoreError as exc:  # not stored: say so rather than fail the activity
            log.warning("teams message refused: %s", exc)
            await context.send_activity(MessageFactory.text(STORE_REFUSAL))

    async def _publish(self, incoming: Incoming) -> None:
        context = self._context
        if context is None:
            raise TeamsError("the teams channel is not running")
        message = to_inbound(incoming, message_id=new_message_id())
        live = self._live_text(message.id, message.delivery, kind=incoming.kind)
        if live is not None:
            await live.open()  # before publishing: no delta can slip past
        try:
            published = await context.bus.publish_inbound(message)
        except BaseException:
            if live is not None:
                await live.finish()
            raise
        if published.duplicate:
            if live is not None:
                await live.finish()
            log.info("teams activity already published event_id=%s", incoming.event_id)
            return
        log.info(
            "teams message published session=%s message_id=%s kind=%s",
            message.session_key,
            message.id,
            incoming.kind,
        )
        if live is not None:
            self._live[message.id] = live
            live.start(on_expired=lambda: self._live.pop(message.id, None))
        typing = Typing(
            lambda: self._send_typing(message.delivery),
            interval=self.config.typing_interval,
            first_wait=self._typing_after,
        )
        self._typing[message.id] = typing
        # A reply another process delivers never reaches send() here: forget it at the end.
        typing.start(
            name=f"teams-typing-{message.id}",
            on_done=lambda: self._typing.pop(message.id, None),
        )

    def _live_text(self, message_id: str, delivery: Delivery, *, kind: str) -> LiveText | None:
        """Streamed text for a 1:1 chat (Teams streams only there; groups get the final)."""
        if self._context is None or self._stream_interval is None or kind != "personal":
            return None

        async def post(text: str) -> str:
            return await self._post(delivery, text)

        async def edit(activity_id: str, text: str) -> None:
            await self._edit(delivery, activity_id, text)

        return LiveText(
            hub=self._context.hub,
            message_id=message_id,
            post=post,
            edit=edit,
            interval=self._stream_interval,
            first_wait=self._typing_after,
        )

    async def _refuse(self, context: TurnContext, incoming: Incoming) -> None:
        if incoming.event_id in self._refused:
            return
        self._refused.remember(incoming.event_id)
        log.info("teams refused user=%s tenant=%s (allow-lists)", incoming.user, incoming.tenant)
        await context.send_activity(MessageFactory.text(REFUSAL))

    # -- outbound ------------------------------------------------------------------------

    async def send(self, message: OutboundMessage) -> None:
        """Send the final reply (split, Markdown) to its conversation, in place of the
        streamed text if there is one; stop typing there.

        Raises:
            TeamsError: the connector refused it or the channel is not running (retried).
        """
        if not self._running:
            raise TeamsError("the teams channel is not running")
        typing = self._typing.pop(message.inbound_id, None)
        if typing is not None:
            await typing.stop()
        live = self._live.pop(message.inbound_id, None)
        if live is not None and (placeholder := await live.finish()) is not None:
            self._placeholders.remember(message.id, placeholder)
        text = error_line(message.text) if message.kind == "error" else message.text
        parts = split(text or "(empty reply)")
        done: int = self._sent_parts.get(message.id, 0)
        for index, part in enumerate(parts[done:], start=done):
            placeholder = self._placeholders.pop(message.id, None) if index == 0 else None
            if placeholder is not None:
                try:
                    await self._edit(message.delivery, placeholder, part)
                except TeamsError as exc:  # the final text is complete all the same
                    log.info("replacing the streamed text failed (%s): posting anew", exc)
                    await self._post(message.delivery, part)
            else:
                await self._post(message.delivery, part)
            self._sent_parts.remember(message.id, index + 1)
        self._sent_parts.pop(message.id, None)

    async def _post(self, delivery: Delivery, text: str) -> str:
        """Post ``text`` in the conversation (a reply to the user's message); its id."""
        posted: list[str] = []

        async def post(context: TurnContext) -> None:
            response = await context.send_activity(MessageFactory.text(text))
            posted.append(response.id if response is not None and response.id else "")

        await self._continue(delivery, post)
        return posted[0] if posted else ""

    async def _edit(self, delivery: Delivery, activity_id: str, text: str) -> None:
        """Replace the text of the bot's message ``activity_id``."""

        async def edit(context: TurnContext) -> None:
            activity = MessageFactory.text(text)
            activity.id = activity_id
            await context.update_activity(activity)

        await self._continue(delivery, edit)

    async def _send_typing(self, delivery: Delivery) -> None:
        async def typing(context: TurnContext) -> None:
            await context.send_activity(Activity(type=ActivityTypes.typing))

        await self._continue(delivery, typing)

    async def _continue(
        self, delivery: Delivery, callback: Callable[[TurnContext], Awaitable[None]]
    ) -> None:
        """Run ``callback`` in the conversation of ``delivery`` (a proactive turn)."""
        try:
            reference = reference_of(delivery)
        except ValueError as exc:
            raise TeamsError(str(exc)) from exc
        activity = _continuation(reference)
        adapter = self._sdk.adapter
        try:
            if self.config.anonymous:
                await adapter.continue_conversation_with_claims(
                    ClaimsIdentity(), activity, callback
                )
            else:
                await adapter.continue_conversation(self.config.app_id, activity, callback)
        except TeamsError:
            raise
        except Exception as exc:
            raise TeamsError(f"teams connector call failed: {_describe(exc)}") from exc


_FORWARDED = ("Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Real-IP")


def _not_local(request: web.Request) -> str | None:
    """Why ``request`` may come from off this host, or None: a loopback ``http.host``
    is not enough when a dev tunnel or a reverse proxy on this host forwards to it."""
    for header in _FORWARDED:
        if header in request.headers:
            return f"it was forwarded ({header})"
    # request.remote, not the transport: in a channel process of its own the gateway's
    # front hands the peer over (a Unix socket has no address of its own).
    host = request.remote
    return None if is_loopback(host) else f"it came from {host}"


def _continuation(reference: ConversationReference) -> Activity:
    """The proactive turn's activity; replies go under the user's message (its thread)."""
    activity = reference.get_continuation_activity()
    if reference.activity_id:
        activity.id = reference.activity_id
    return activity


def _describe(exc: Exception) -> str:
    text = " ".join(str(exc).split())[:300]
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
