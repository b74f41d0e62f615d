"""A chat platform stand-in and the plugin channel that talks to it (``loop``).

The platform refuses connections (503) until ``accepting`` is set, and records the
messages the channel posts: what a real platform that is down, then back, looks like.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from aiohttp import web
from pydantic import SecretStr

from channels.base import ChannelConfig, ChannelContext, ChannelPlugin
from core.messages import OutboundMessage
from tests.fakes.loopback import LoopbackServer

__all__ = ["FakePlatform", "LoopChannel", "LoopConfig", "plugin"]


@dataclass(kw_only=True)
class FakePlatform(LoopbackServer):
    """``POST /connect`` (503 until ``accepting``; 401 for a wrong token), ``POST /messages``.

    Attributes:
        accepting: whether connections are accepted.
        token: the bot token it accepts.
        refused: how many connections it refused.
        refused_at: when it refused each (``time.monotonic()``).
    """

    accepting: bool = False
    token: str = ""
    refused: int = 0
    refused_at: list[float] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/connect", self._connect)
        app.router.add_post("/messages", self._message)

    async def _connect(self, request: web.Request) -> web.Response:
        if not self.accepting:
            self.refused += 1
            self.refused_at.append(time.monotonic())
            return web.json_response({"error": "platform down"}, status=503)
        if request.headers.get("Authorization") != f"Bearer {self.token}":
            return web.json_response({"error": "bad token"}, status=401)
        return web.json_response({"ok": True})

    async def _message(self, request: web.Request) -> web.Response:
        self.requests.append(await request.json())
        return web.json_response({"ok": True})


class LoopConfig(ChannelConfig):
    """The loopback test platform."""

    url: str = "http://127.0.0.1:9"
    """Where the platform listens."""
    token: SecretStr = SecretStr("")
    """The bot token."""
    fail_create: bool = False
    """Refuse the config in ``create`` (a check no model can express)."""


class LoopChannel:
    """Connects to the platform on start; posts each final reply to it."""

    name = "loop"

    def __init__(self, config: LoopConfig) -> None:
        if config.fail_create:
            raise ValueError("fail_create is set")
        self.config = config
        self._http: aiohttp.ClientSession | None = None

    async def start(self, context: ChannelContext) -> None:
        self._http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5))
        token = self.config.token.get_secret_value()
        url = f"{self.config.url}/connect?token={token}"
        async with self._http.post(url, headers={"Authorization": f"Bearer {token}"}) as resp:
            if resp.status != 200:
                # Like many SDK errors, this one carries the URL it called (and its token).
                raise ConnectionError(f"{url} answered {resp.status} with token {token}")

    async def stop(self) -> None:
        if self._http is not None:
            await self._http.close()
            self._http = None

    async def send(self, message: OutboundMessage) -> None:
        if self._http is None:
            raise ConnectionError("not connected")
        body: dict[str, Any] = {"chat": message.delivery.chat_id, "text": message.text}
        async with self._http.post(f"{self.config.url}/messages", json=body) as resp:
            resp.raise_for_status()


plugin = ChannelPlugin(name="loop", config_model=LoopConfig, create=LoopChannel)
