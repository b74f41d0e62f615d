"""The Channel protocol, the context a channel is started with, and the plugin contract."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

from aiohttp import web
from prometheus_client.registry import Collector
from pydantic import BaseModel, ConfigDict

from core.bus.ephemeral import EphemeralHub
from core.bus.sql import SqlBus
from core.messages import Delivery, OutboundMessage
from core.sessions import UnreadKeeper

__all__ = [
    "Channel",
    "ChannelConfig",
    "ChannelContext",
    "ChannelPlugin",
    "DeliveryPolicy",
    "MeteredChannel",
    "ProbedChannel",
    "RetryingChannel",
    "lazy_exports",
]


@dataclass(kw_only=True)
class ChannelContext:
    """What a channel may use: the bus to publish on and wait through, ephemerals,
    where replies nobody saw are kept, and HTTP routes."""

    bus: SqlBus
    hub: EphemeralHub
    unread: UnreadKeeper
    """Keeps a final reply the platform could not show anyone (the CLI with no terminal)."""
    http: web.Application | None = None
    """The gateway's aiohttp app: add routes on the first start (None when HTTP is off).

    The app is frozen once it serves, so a retried start must not add them again."""
    http_host: str | None = None
    """The address that HTTP server binds (``http.host``; None when HTTP is off)."""


@runtime_checkable
class Channel(Protocol):
    """A platform adapter. ``send`` delivers one final reply; raising means retry later.

    ``start`` connects to the platform; raising means "not now": the gateway calls
    ``stop`` (to release what a half-done start holds) and calls ``start`` again later.
    """

    name: str

    async def start(self, context: ChannelContext) -> None: ...

    async def stop(self) -> None: ...

    async def send(self, message: OutboundMessage) -> None: ...


@dataclass(frozen=True, kw_only=True)
class DeliveryPolicy:
    """How a channel's failed deliveries are retried (by its DeliveryWorker).

    Attempt ``n`` that fails is retried after ``min(max_backoff, first_backoff * 2**(n-1))``
    seconds (jittered); after ``max_attempts`` the reply is given up on and recorded as
    failed (the outbox row, a ``delivery.failed`` event, ``familiar status``).
    """

    max_attempts: int = 8
    first_backoff: float = 1.0
    max_backoff: float = 300.0


@runtime_checkable
class RetryingChannel(Protocol):
    """Optional: a channel whose deliveries follow their own `DeliveryPolicy`."""

    @property
    def delivery_policy(self) -> DeliveryPolicy: ...


@runtime_checkable
class MeteredChannel(Protocol):
    """Optional: a channel with its own Prometheus metrics (served on ``/metrics``)."""

    @property
    def metrics_collector(self) -> Collector: ...


@runtime_checkable
class ProbedChannel(Protocol):
    """Optional: a channel that can check its credentials without starting (doctor)."""

    async def probe(self) -> str:
        """Check the credentials against the platform; returns what was proven.

        Raises:
            FamiliarError: refused or unreachable (the message names the setting).
        """
        ...


class ChannelConfig(BaseModel):
    """Base of every channel's config model: its ``[channels.<name>]`` table.

    Subclasses add their keys (with defaults and docstrings: ``familiar init``
    documents them), type credentials as ``SecretStr`` (masked wherever config is
    shown) and keep ``extra="forbid"``, so a typo is a config error naming the key.
    """

    model_config = ConfigDict(extra="forbid")

    enabled: bool = False
    """Start this channel with the gateway."""

    @property
    def http_routes(self) -> tuple[str, ...]:
        """The path prefixes this channel serves on ``ChannelContext.http`` with this
        config (``("/webhook",)``; none by default).

        When the channel runs in a process of its own (``gateway.channel_processes =
        "per-channel"``), the gateway's HTTP front forwards these paths to it (each
        prefix and everything below it), knowing them from the config alone: routes
        outside them are not reachable there. The peer address reaches the handler as
        ``request.remote``: read it there, not from the transport.
        """
        return ()

    def delivery_problem(self, delivery: Delivery) -> str | None:
        """Why this channel cannot deliver a reply to ``delivery`` (None: it can try).

        Asked without I/O when something outside a conversation addresses it (``familiar
        schedule add --session KEY``: the delivery of KEY's last message, or one made from
        the key when it has none), so a reply that could never arrive is refused when it
        is asked for instead of waiting in the outbox. The default trusts any delivery.
        """
        return None


C = TypeVar("C", bound=ChannelConfig)


@dataclass(frozen=True, kw_only=True)
class ChannelPlugin(Generic[C]):
    """What a ``familiar.channels`` entry point resolves to.

    Example (in a third-party package's ``pyproject.toml``)::

        [project.entry-points."familiar.channels"]
        matrix = "familiar_matrix:plugin"

    with ``plugin = ChannelPlugin(name="matrix", config_model=MatrixConfig,
    create=MatrixChannel.from_config)``.

    Attributes:
        name: the channel's name: its ``[channels.<name>]`` table, the entry point's
            name and the ``name`` of the channel it creates.
        config_model: validates that table (a ChannelConfig subclass).
        create: builds the channel from its validated config, without I/O; raising
            here is a config error. Connecting belongs in ``Channel.start``.
    """

    name: str
    config_model: type[C]
    create: Callable[[C], Channel]

    def build(self, config: ChannelConfig) -> Channel:
        """``create(config)``, checking that ``config`` is this plugin's model.

        Raises:
            TypeError: ``config`` is not a ``config_model``.
        """
        if not isinstance(config, self.config_model):
            raise TypeError(
                f"channel {self.name!r} takes {self.config_model.__name__}, "
                f"not {type(config).__name__}"
            )
        return self.create(config)


def lazy_exports(package: str, names: Mapping[str, str]) -> Callable[[str], Any]:
    """A package's ``__getattr__`` that imports each of ``names`` from its module on
    first use: importing the package (the entry point, its config model) then does not
    import the platform SDK behind the channel.

    Args:
        package: the package's ``__name__`` (for the error message).
        names: exported name -> the module that defines it.
    """

    def __getattr__(name: str) -> Any:
        if name in names:
            return getattr(importlib.import_module(names[name]), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__
