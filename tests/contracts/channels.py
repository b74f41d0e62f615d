"""Channels under test, each with an adapter for its platform side.

The contract suite speaks to a channel only through the Channel protocol and a rig:
the rig makes the platform say something (a user typing into the CLI, a Slack event,
a webhook POST) and probes what the platform received. A new channel adds a rig here
and an entry in :data:`CHANNEL_RIGS`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import socket
from collections.abc import Callable
from typing import Protocol

import aiohttp
from aiohttp import web
from pydantic import SecretStr

from channels.base import Channel
from channels.cli import ChannelStopped, CliChannel
from channels.slack import SlackChannel, SlackConfig
from channels.teams import TeamsChannel, TeamsConfig
from channels.webhook import (
    HookConfig,
    WebhookChannel,
    WebhookConfig,
    WebhookStopped,
    signed_headers,
)
from core.messages import OutboundMessage
from tests.fakes.fake_slack import FakeSlack, event_body
from tests.fakes.fake_teams import APP_ID, TENANT, FakeEntraTokens, FakeTeams, message

__all__ = ["CHANNEL_RIGS", "ChannelRig", "CliRig", "SlackRig", "TeamsRig", "WebhookRig"]


class ChannelRig(Protocol):
    """A channel and its platform side.

    Attributes:
        channel: the channel under test, not started yet.
        session_key: the documented shape of the session keys the channel publishes.
        stopped_errors: what the platform probe may raise once the channel stopped.
        http: the HTTP app the channel is started with (the gateway's), if it needs one.
    """

    channel: Channel
    session_key: re.Pattern[str]
    stopped_errors: tuple[type[BaseException], ...]
    http: web.Application | None

    async def open(self) -> None:
        """Bring the platform side up, before the channel starts."""

    async def started(self) -> None:
        """Finish the platform side once the channel started (e.g. serve its routes)."""

    async def close(self) -> None:
        """Take the platform side down, after the channel stopped."""

    async def say(self, text: str, *, conversation: str) -> str:
        """A user says ``text`` in ``conversation``; returns the platform's id for it."""

    async def received(self, said: str, timeout: float | None) -> str | None:
        """The reply text the platform got for message ``said``; None if none came in time."""


class CliRig:
    """The CLI channel, seen from a terminal that watches its session (``familiar chat``).

    ``say`` submits like ``familiar send`` and then leaves, so the reply reaches the
    terminal through the channel's delivery (``send``), which is what the contract tests.
    """

    session_key = re.compile(r"cli:[A-Za-z0-9][A-Za-z0-9._@+=-]{0,127}")
    stopped_errors = (ChannelStopped,)
    http = None

    def __init__(self) -> None:
        self.channel = CliChannel(handover_grace=0.1)
        self._watching = contextlib.AsyncExitStack()
        self._terminals: dict[str, asyncio.Queue[OutboundMessage | None]] = {}
        self._session_of: dict[str, str] = {}
        self._got: dict[str, OutboundMessage] = {}

    async def open(self) -> None:
        pass

    async def close(self) -> None:
        await self._watching.aclose()

    async def say(self, text: str, *, conversation: str) -> str:
        session = f"cli:{conversation}"
        if session not in self._terminals:
            watch = self.channel.watch(session)
            self._terminals[session] = await self._watching.enter_async_context(watch)
        submitted = await self.channel.submit(session, text)
        self.channel.detach(submitted.message_id)
        self._session_of[submitted.message_id] = session
        return submitted.message_id

    async def received(self, said: str, timeout: float | None) -> str | None:
        terminal = self._terminals[self._session_of[said]]
        try:
            async with asyncio.timeout(timeout):
                while said not in self._got:
                    reply = await terminal.get()
                    if reply is None:
                        raise ChannelStopped("the cli channel stopped")
                    self._got[reply.inbound_id] = reply
        except TimeoutError:
            return None
        return self._got[said].text

    async def started(self) -> None:
        pass


class SlackRig:
    """The Slack channel in Socket Mode against the fake Slack: a user DMs the bot.

    ``say`` sends a ``message.im`` envelope and returns once the channel acked it;
    ``received`` waits for the threaded ``chat.postMessage`` under that message. Once
    the channel hung up its Socket Mode connection, waits end with ConnectionError.
    """

    session_key = re.compile(r"slack:T[A-Z0-9]+:[CDG][A-Z0-9]+(?::\d+\.\d+)?")
    stopped_errors = (ConnectionError,)
    http = None

    def __init__(self) -> None:
        self.fake = FakeSlack()
        self.channel: Channel = CliChannel()  # replaced by open()

    async def open(self) -> None:
        await self.fake.start()
        config = SlackConfig(
            enabled=True,
            bot_token=SecretStr(self.fake.bot_token),
            app_token=SecretStr(self.fake.app_token),
            api_url=self.fake.api_url,
            dm_reply_in_thread=True,  # each reply under its message: matched to it
        )
        self.channel = SlackChannel(config=config)

    async def started(self) -> None:
        pass

    async def close(self) -> None:
        await self.fake.stop()

    async def say(self, text: str, *, conversation: str) -> str:
        ts = self.fake.new_ts()
        event = {
            "type": "message",
            "channel": f"D{conversation.upper()}",
            "channel_type": "im",
            "user": f"U{conversation.upper()}",
            "text": text,
            "ts": ts,
        }
        await self.fake.envelope("events_api", event_body(event))
        return ts

    async def received(self, said: str, timeout: float | None) -> str | None:
        if self.fake.socket_closed.is_set():
            raise ConnectionError("the channel hung up")
        reply = asyncio.create_task(self.fake.wait_for("chat.postMessage", thread_ts=said))
        closed = asyncio.create_task(self.fake.socket_closed.wait())
        done, pending = await asyncio.wait(
            {reply, closed}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
        )
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        if reply in done:
            return str(reply.result()[0].args["text"])
        if closed in done:
            raise ConnectionError("the channel hung up")
        return None


class WebhookRig:
    """The webhook channel, seen from a caller with a callback endpoint.

    ``say`` is a signed POST naming the rig's callback URL; a reply reaches the caller
    as a signed callback, which is what the channel's ``send`` does. While waiting, the
    caller polls the message: a stopped channel answers 503 there.
    """

    session_key = re.compile(r"webhook:contract:[A-Za-z0-9][A-Za-z0-9._@+=-]{0,127}")
    stopped_errors = (WebhookStopped,)
    _SECRET = "contract-secret"

    def __init__(self) -> None:
        # Bound now, served in open(): the callback URL is known before the config is.
        self._callback_socket = socket.socket()
        self._callback_socket.bind(("127.0.0.1", 0))
        port = self._callback_socket.getsockname()[1]
        self._callback_url = f"http://127.0.0.1:{port}/callback"
        hook = HookConfig(
            secret=SecretStr(self._SECRET), callback_allow=[self._callback_url], rate=1000
        )
        config = WebhookConfig(enabled=True, hooks={"contract": hook}, callback_timeout=2.0)
        self.channel = WebhookChannel(config=config)
        self.http = web.Application()
        self._runners: list[web.AppRunner] = []
        self._client: aiohttp.ClientSession | None = None
        self._base = ""
        self._got: dict[str, str] = {}
        self._arrived = asyncio.Event()

    async def open(self) -> None:
        pass

    async def started(self) -> None:
        # The channel added its routes at start: only now may its app be served.
        callbacks = web.Application()
        callbacks.router.add_post("/callback", self._callback)
        for app in (self.http, callbacks):
            runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
            await runner.setup()
            self._runners.append(runner)
        await web.TCPSite(self._runners[0], "127.0.0.1", 0).start()
        await web.SockSite(self._runners[1], self._callback_socket).start()
        self._base = f"http://127.0.0.1:{self._runners[0].addresses[0][1]}"
        self._client = aiohttp.ClientSession()

    async def close(self) -> None:
        if self._client is not None:
            await self._client.close()
        for runner in self._runners:
            await runner.cleanup()
        self._callback_socket.close()

    async def _callback(self, request: web.Request) -> web.Response:
        body = await request.read()
        expected = signed_headers(
            self._SECRET, body, now=float(request.headers["X-Familiar-Timestamp"])
        )
        if request.headers.get("X-Familiar-Signature") != expected["X-Familiar-Signature"]:
            return web.json_response({"error": "bad signature"}, status=401)
        data = json.loads(body)
        self._got[data["message_id"]] = data["reply"]
        self._arrived.set()
        return web.json_response({})

    async def say(self, text: str, *, conversation: str) -> str:
        assert self._client is not None
        body = json.dumps(
            {"text": text, "session": conversation, "callback_url": self._callback_url}
        ).encode()
        headers = {**signed_headers(self._SECRET, body), "Content-Type": "application/json"}
        async with self._client.post(
            f"{self._base}/webhook/contract", data=body, headers=headers
        ) as response:
            answer = await response.json()
            if response.status == 503:
                raise WebhookStopped(answer["error"])
            assert response.status == 202, answer
            return str(answer["message_id"])

    async def _alive(self, said: str) -> None:
        assert self._client is not None
        url = f"{self._base}/webhook/contract/messages/{said}"
        headers = signed_headers(self._SECRET, b"")
        async with self._client.get(url, headers=headers) as response:
            if response.status == 503:
                raise WebhookStopped((await response.json())["error"])

    async def received(self, said: str, timeout: float | None) -> str | None:
        try:
            async with asyncio.timeout(timeout):
                while said not in self._got:
                    await self._alive(said)
                    self._arrived.clear()
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._arrived.wait(), 0.05)
        except TimeoutError:
            return None
        return self._got[said]


class TeamsRig:
    """The Teams channel against the fake Teams: a user writes to the bot in a 1:1 chat.

    ``say`` POSTs a signed activity to ``/api/messages`` and returns its id once the
    channel answered 202; ``received`` waits for the connector call replying to it.
    While waiting it asks the channel whether it still runs (an ignored
    ``conversationUpdate``): a stopped channel answers 503, ending the wait.
    """

    session_key = re.compile(r"teams:a:[A-Za-z0-9-]+")
    stopped_errors = (ConnectionError,)

    def __init__(self) -> None:
        self.fake = FakeTeams()
        self.http = web.Application()
        config = TeamsConfig(
            enabled=True,
            app_id=APP_ID,
            app_password=SecretStr("contract-secret"),
            tenant_id=TENANT,
            service_url_allow=["*"],
        )
        self.channel = TeamsChannel(config=config, tokens=FakeEntraTokens)
        self._runner: web.AppRunner | None = None
        self._client: aiohttp.ClientSession | None = None
        self._jwks = contextlib.ExitStack()
        self._url = ""

    async def open(self) -> None:
        await self.fake.start()
        self._jwks.enter_context(self.fake.sdk_jwks())

    async def started(self) -> None:
        self._runner = web.AppRunner(self.http, access_log=None, shutdown_timeout=0.5)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0).start()
        self._url = f"http://127.0.0.1:{self._runner.addresses[0][1]}/api/messages"
        self._client = aiohttp.ClientSession()

    async def close(self) -> None:
        if self._client is not None:
            await self._client.close()
        if self._runner is not None:
            await self._runner.cleanup()
        self._jwks.close()
        await self.fake.stop()

    async def _post(self, activity: dict[str, object]) -> int:
        assert self._client is not None
        headers = {"Authorization": f"Bearer {self.fake.token()}"}
        async with self._client.post(self._url, json=activity, headers=headers) as response:
            if response.status == 503:
                raise ConnectionError("the teams channel stopped")
            return response.status

    async def say(self, text: str, *, conversation: str) -> str:
        activity = message(text, service_url=self.fake.service_url, user=conversation)
        status = await self._post(activity)
        assert status == 202, status
        return str(activity["id"])

    async def received(self, said: str, timeout: float | None) -> str | None:
        try:
            async with asyncio.timeout(timeout):
                while True:
                    replies = [a for a in self.fake.of() if a.reply_to == said]
                    if replies:
                        return replies[0].text
                    probe = message("", service_url=self.fake.service_url)
                    probe["type"] = "conversationUpdate"
                    await self._post(probe)
                    with contextlib.suppress(TimeoutError):
                        await self.fake.wait_for(count=len(self.fake.of()) + 1, timeout=0.05)
        except TimeoutError:
            return None


CHANNEL_RIGS: dict[str, Callable[[], ChannelRig]] = {
    "cli": CliRig,
    "slack": SlackRig,
    "teams": TeamsRig,
    "webhook": WebhookRig,
}
"""Every Channel implementation the contract suite runs against, by id."""
