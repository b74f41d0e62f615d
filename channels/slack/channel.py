"""The Slack channel: bolt's AsyncApp in Socket Mode or on ``POST /slack/events``."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import OrderedDict
from collections.abc import Coroutine, Mapping
from typing import Any, Literal

import aiohttp
from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response, to_bolt_request
from slack_bolt.adapter.socket_mode.aiohttp import AsyncSocketModeHandler
from slack_bolt.async_app import AsyncApp, AsyncBoltContext

from channels.base import ChannelContext, DeliveryPolicy
from channels.slack.api import SlackApi, SlackError, SlackRateLimited, build_client
from channels.slack.config import EVENTS_PATH, SlackConfig
from channels.slack.files import FileFetcher
from channels.slack.intake import (
    BotIdentity,
    Incoming,
    allowed,
    command_text,
    from_event,
    to_inbound,
)
from channels.slack.live import STREAM_CHARS, LiveReply, Shown
from channels.slack.render import error_line, split, to_mrkdwn
from core.errors import StoreError
from core.messages import OutboundMessage, new_message_id

__all__ = ["REFUSAL", "STORE_REFUSAL", "SlackChannel"]

log = logging.getLogger(__name__)

REFUSAL = "Sorry, I'm not set up to talk with you here. Ask my owner to add you."
STORE_REFUSAL = (
    "Sorry, I can't take messages right now: my storage is full or failing. "
    "Please send that again in a few minutes."
)
"""The one reply a user or conversation outside the allow-lists gets."""
_MEMORY = 10_000
"""How many event ids, threads and parts sent are remembered (oldest forgotten first)."""
_FILE_BUDGET = 1.5
"""Seconds attached files may take to download: Slack wants its ack within 3 s."""


class _Recent(OrderedDict[str, Any]):
    """A bounded mapping: the oldest entries go once it holds ``_MEMORY``."""

    def remember(self, key: str, value: Any = None) -> None:
        self[key] = value
        self.move_to_end(key)
        while len(self) > _MEMORY:
            self.popitem(last=False)


class SlackChannel:
    """Slack conversations on the bus: DMs, mentions and the threads they start.

    Every event is published durably before it is acknowledged (the listener runs
    before bolt answers: ``process_before_response``), with Slack's ``event_id`` as
    the bus's dedupe id, so a retried event or a redelivered envelope is stored once
    and answered once. Replies come through the outbox (`send`).

    Args:
        config: the ``[channels.slack]`` table.
        progress_interval: the shortest time between two edits of a placeholder.
        first_wait: post a placeholder after this long without a reply or progress.
    """

    name = "slack"

    def __init__(
        self, *, config: SlackConfig, progress_interval: float = 1.0, first_wait: float = 1.0
    ) -> None:
        self.config = config
        self._interval = progress_interval
        self._first_wait = first_wait
        self._context: ChannelContext | None = None
        self._session: aiohttp.ClientSession | None = None
        self._api: SlackApi | None = None
        self._files: FileFetcher | None = None
        self._bolt: AsyncApp | None = None
        self._socket: AsyncSocketModeHandler | None = None
        self._me: BotIdentity | None = None
        self._routes_added = False
        self._live: dict[str, LiveReply] = {}
        self._shown: dict[str, Shown] = {}
        self._sent_parts: _Recent = _Recent()
        self._threads: _Recent = _Recent()
        self._refused: _Recent = _Recent()
        self._commands: _Recent = _Recent()
        self._background: set[asyncio.Task[None]] = set()

    @classmethod
    def from_config(cls, config: SlackConfig) -> SlackChannel:
        return cls(config=config)

    @property
    def delivery_policy(self) -> DeliveryPolicy:
        """Failed sends are retried ``send_attempts`` times; rate limits never count."""
        return DeliveryPolicy(max_attempts=self.config.send_attempts)

    @property
    def api(self) -> SlackApi | None:
        """The Web API calls while the channel runs."""
        return self._api

    # -- lifecycle -----------------------------------------------------------------------

    async def start(self, context: ChannelContext) -> None:
        """Check the bot token (``auth.test``), then listen (socket or http mode).

        Raises:
            SlackError: Slack refused a token, lacks a scope or cannot be reached (the
                gateway reports it and retries).
        """
        cfg = self.config
        if cfg.mode == "http":
            if context.http is None:
                raise SlackError("http mode needs the gateway's HTTP server ([http] enabled)")
            if not self._routes_added:  # before anything can fail: the app freezes
                context.http.router.add_post(EVENTS_PATH, self._http_events)
                self._routes_added = True
        self._context = context
        assert cfg.bot_token is not None  # SlackConfig requires it once enabled
        token = cfg.bot_token.get_secret_value()
        self._session = aiohttp.ClientSession()
        client = build_client(token=token, api_url=cfg.api_url, session=self._session)
        api = SlackApi(client)
        info = await api.auth()
        self._me = BotIdentity(team_id=info.team_id, user_id=info.user_id, bot_id=info.bot_id)
        self._files = FileFetcher(
            session=self._session, token=token, api_url=cfg.api_url, max_bytes=cfg.max_file_bytes
        )
        app = self._build_app(client)
        self._api, self._bolt = api, app
        if cfg.mode == "socket":
            await self._connect_socket(app)
        log.info("slack connected mode=%s team=%s bot=%s", cfg.mode, info.team_id, info.user_id)

    async def _connect_socket(self, app: AsyncApp) -> None:
        assert self.config.app_token is not None
        handler = AsyncSocketModeHandler(
            app, app_token=self.config.app_token.get_secret_value(), web_client=app.client
        )
        self._socket = handler
        try:
            # Asked here, not inside connect(), which would retry a refused token forever.
            handler.client.wss_uri = await handler.client.issue_new_wss_url()
        except Exception as exc:
            data = getattr(getattr(exc, "response", None), "data", None)
            error = data.get("error") if isinstance(data, dict) else type(exc).__name__
            raise SlackError(f"apps.connections.open failed: {error}", error=str(error)) from exc
        async with asyncio.timeout(15):
            await handler.connect_async()  # type: ignore[no-untyped-call]

    async def stop(self) -> None:
        """Disconnect; unfinished progress stops showing. Idempotent."""
        self._bolt = None
        self._api = None
        lives, self._live = list(self._live.values()), {}
        for live in lives:
            await live.finish()
        for task in list(self._background):
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
        if self._socket is not None:
            socket, self._socket = self._socket, None
            with contextlib.suppress(Exception):
                await socket.close_async()  # type: ignore[no-untyped-call]
        if self._session is not None:
            session, self._session = self._session, None
            await session.close()
        self._context = None

    # -- inbound -------------------------------------------------------------------------

    def _build_app(self, client: Any) -> AsyncApp:
        secret = self.config.signing_secret
        app = AsyncApp(
            client=client,
            signing_secret=secret.get_secret_value() if secret else "socket-mode-unused",
            process_before_response=True,  # publish durably, then ack
            request_verification_enabled=self.config.mode == "http",
            logger=logging.getLogger("channels.slack.bolt"),
        )
        app.event("app_mention")(self._on_mention)
        app.event("message")(self._on_message)
        app.event("assistant_thread_started")(self._ignore)
        app.event("assistant_thread_context_changed")(self._ignore)
        app.command("/familiar")(self._on_command)
        return app

    async def _http_events(self, request: web.Request) -> web.Response:
        app = self._bolt
        if app is None:
            return web.json_response({"error": "the slack channel is not running"}, status=503)
        return await to_aiohttp_response(await app.async_dispatch(await to_bolt_request(request)))

    async def _ignore(self) -> None:
        return None

    async def _on_mention(self, body: dict[str, Any], event: dict[str, Any]) -> None:
        await self._on_event("app_mention", body, event)

    async def _on_message(self, body: dict[str, Any], event: dict[str, Any]) -> None:
        await self._on_event("message", body, event)

    async def _on_event(
        self, kind: Literal["app_mention", "message"], body: Mapping[str, Any], event: Any
    ) -> None:
        me = self._me
        if me is None or not isinstance(event, Mapping):
            return
        incoming = from_event(
            event,
            kind=kind,
            team=str(body.get("team_id") or me.team_id),
            event_id=body.get("event_id"),
            me=me,
            respond_to_bots=self.config.respond_to_bots,
        )
        if incoming is None:
            return
        if not incoming.in_known_thread and not await self._knows_thread(incoming):
            return
        if not allowed(incoming, self.config):
            self._refuse(incoming)
            return
        try:
            await self._publish(incoming)
        except StoreError as exc:  # acked all the same: Slack's retries would fail alike
            log.warning("slack message refused: %s", exc)
            self._say(incoming, STORE_REFUSAL)

    async def _knows_thread(self, incoming: Incoming) -> bool:
        """Whether the bot is part of this channel thread (it has answered in it)."""
        key = incoming.session_key
        if key in self._threads:
            return True
        assert self._context is not None
        if await self._context.bus.last_user_delivery(key) is None:
            return False
        self._threads.remember(key)
        return True

    async def _publish(self, incoming: Incoming) -> None:
        context, api, files = self._context, self._api, self._files
        assert context is not None and api is not None and files is not None
        fetched = await files.fetch(incoming.files, budget=_FILE_BUDGET)
        text = "\n\n".join(t for t in (incoming.text, fetched.text) if t) or "(empty message)"
        message = to_inbound(
            incoming,
            message_id=new_message_id(),
            text=text,
            attachments=fetched.attachments,
            config=self.config,
        )
        live = LiveReply(
            api=api,
            channel=incoming.channel,
            thread_ts=message.delivery.thread_id,
            user=incoming.user,
            team=incoming.team,
            hub=context.hub,
            message_id=message.id,
            interval=self._interval,
            first_wait=self._first_wait,
        )
        await live.open()  # before publishing: no delta can slip past
        try:
            published = await context.bus.publish_inbound(message)
        except BaseException:
            await live.finish()
            raise
        self._threads.remember(incoming.session_key)
        if published.duplicate:
            await live.finish()
            log.info("slack event already published event_id=%s", incoming.event_id)
            return
        self._live[message.id] = live
        live.start()

    def _refuse(self, incoming: Incoming) -> None:
        key = incoming.event_id or f"{incoming.channel}:{incoming.ts}"
        if key in self._refused:
            return
        self._refused.remember(key)
        log.info("slack refused user=%s channel=%s (allow-lists)", incoming.user, incoming.channel)
        self._say(incoming, REFUSAL)

    def _say(self, incoming: Incoming, text: str) -> None:
        """Answer in the message's thread directly (not through the outbox)."""
        thread = incoming.reply_thread(self.config)
        if self._api is not None:
            self._spawn(self._api.post(incoming.channel, text, thread_ts=thread))

    def _spawn(self, work: Coroutine[Any, Any, Any]) -> None:
        async def run() -> None:
            try:
                await work
            except SlackError as exc:
                log.warning("slack: %s", exc)

        task = asyncio.create_task(run())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _on_command(self, ack: Any, body: dict[str, Any], context: AsyncBoltContext) -> None:
        """``/familiar <text>``: the text goes to a thread under a post naming the asker."""
        me = self._me
        channel, user = str(body.get("channel_id") or ""), str(body.get("user_id") or "")
        trigger = str(body.get("trigger_id") or "")
        if me is None or not channel:
            await ack()
            return
        text = command_text(str(body.get("text") or ""))
        probe = Incoming(
            team=str(body.get("team_id") or me.team_id),
            channel=channel,
            user=user,
            text=text,
            ts="",
            thread_ts=None,
            event_id=f"command:{trigger}" if trigger else None,
        )
        if not allowed(probe, self.config):
            await ack(text=REFUSAL)
            return
        anchor = self._commands.get(trigger) if trigger else None
        if anchor is None:
            assert self._api is not None
            try:
                anchor = await self._api.post(channel, f"<@{user}>: {to_mrkdwn(text)}")
            except SlackError as exc:
                log.info("slack /familiar could not post: %s", exc)
                await ack(text="I cannot post here: invite me to this conversation first.")
                return
            if trigger:
                self._commands.remember(trigger, anchor)
        incoming = Incoming(
            team=probe.team,
            channel=channel,
            user=user,
            text=text,
            ts=anchor,
            thread_ts=None,
            event_id=probe.event_id,
        )
        try:
            await self._publish(incoming)
        except StoreError as exc:
            log.warning("slack /familiar refused: %s", exc)
            await ack(text=STORE_REFUSAL)
            return
        await ack()

    # -- outbound ------------------------------------------------------------------------

    async def send(self, message: OutboundMessage) -> None:
        """Post the final reply in its thread (split, mrkdwn), taking over the message
        that showed progress: a stream is ended with the rest of the text, a placeholder
        (or a stream that failed midway) is replaced by the first part.

        Raises:
            SlackRateLimited: Slack keeps answering 429 (the outbox waits, then retries).
            SlackError: Slack refused it or the channel is not running (retried later).
        """
        api = self._api
        if api is None:
            raise SlackError("the slack channel is not running")
        live = self._live.pop(message.inbound_id, None)
        if live is not None:
            shown = await live.finish()
            if shown is not None:
                self._shown[message.id] = shown
        delivery = message.delivery
        if message.id not in self._sent_parts and await self._end_stream(message):
            self._shown.pop(message.id, None)
            return
        text = error_line(message.text) if message.kind == "error" else to_mrkdwn(message.text)
        parts = split(text)
        done: int = self._sent_parts.get(message.id, 0)
        for index, part in enumerate(parts[done:], start=done):
            shown = self._shown.pop(message.id, None) if index == 0 else None
            if shown is not None:
                await self._replace(shown, message, part)
            else:
                await api.post(delivery.chat_id, part, thread_ts=delivery.thread_id)
            self._sent_parts.remember(message.id, index + 1)
        self._sent_parts.pop(message.id, None)

    async def _end_stream(self, message: OutboundMessage) -> bool:
        """End an intact stream with the rest of the reply; False if it cannot be (no
        stream, one that failed, a reply that is not its continuation or is too long)."""
        shown, api = self._shown.get(message.id), self._api
        if shown is None or shown.kind != "stream" or not shown.intact or api is None:
            return False
        final = message.text
        done = shown.streamed
        if not final.startswith(done):
            done = done.rstrip()  # the deltas may end in whitespace the final text drops
        if message.kind == "error" or len(final) > STREAM_CHARS or not final.startswith(done):
            return False
        try:
            await api.stop_stream(message.delivery.chat_id, shown.ts, final[len(done) :])
        except SlackRateLimited:
            raise  # not applied: ended on the next attempt
        except SlackError as exc:
            log.info("ending the stream failed (%s): replacing it whole", exc)
            shown.intact = False
            return False
        return True

    async def _replace(self, shown: Shown, message: OutboundMessage, part: str) -> None:
        """Put ``part`` in place of the message that showed progress. If that cannot be
        edited, it is deleted and ``part`` posted anew: the reply appears once, whole."""
        api, chat = self._api, message.delivery.chat_id
        assert api is not None
        if shown.kind == "stream" and shown.intact:
            # Ended before it is edited (it may still be streaming); any failure here is
            # covered by the edit below.
            with contextlib.suppress(SlackError):
                await api.stop_stream(chat, shown.ts)
            shown.intact = False
        try:
            await api.update(chat, shown.ts, part)
        except SlackRateLimited:
            self._shown[message.id] = shown  # tried again on the next attempt
            raise
        except SlackError as exc:
            log.info("replacing the progress message failed (%s): posting anew", exc)
            with contextlib.suppress(SlackError):
                await api.delete(chat, shown.ts)
            await api.post(chat, part, thread_ts=message.delivery.thread_id)
