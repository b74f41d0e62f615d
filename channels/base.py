"""The Channel protocol and the context a channel is started with."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from aiohttp import web

from core.bus.base import Inbox
from core.bus.ephemeral import EphemeralHub
from core.messages import OutboundMessage

__all__ = ["Channel", "ChannelContext", "ChannelFactory"]


@dataclass(kw_only=True)
class ChannelContext:
    """What a channel may use: the inbox to publish on, ephemerals, and HTTP routes."""

    bus: Inbox
    hub: EphemeralHub
    http: web.Application | None = None
    """The gateway's aiohttp app: add routes before start (None when HTTP is off)."""
    extras: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class Channel(Protocol):
    """A platform adapter. ``send`` delivers one final reply; raising means retry later."""

    name: str

    async def start(self, context: ChannelContext) -> None: ...

    async def stop(self) -> None: ...

    async def send(self, message: OutboundMessage) -> None: ...


class ChannelFactory(Protocol):
    """What the ``familiar.channels`` entry point resolves to: config dict -> Channel."""

    def __call__(self, config: dict[str, Any]) -> Channel: ...
