"""The parts of one run of the gateway that are not its lifecycle: which channels run
where, the scheduler role, delivery elsewhere, and what it reports (``familiar
status``, ``/readyz``, systemd's ``STATUS=``). `gateway.serve` runs them."""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, get_args

from aiohttp import web

from channels.base import Channel, ChannelContext, MeteredChannel
from channels.cli import CliChannel
from core.app import CoreApp
from core.bus.delivery import DeliveryWorker
from core.bus.wake_socket import SocketWakeups
from core.bus.wakeups import WakeupService
from core.errors import ConfigError
from core.messages import OutboundMessage
from core.providers.base import Provider
from core.providers.factory import build_provider
from core.store.engine import Store
from gateway.channel_children import ChannelProcess, isolated_channels
from gateway.channel_proxy import RemoteChannel
from gateway.config import (
    FamiliarConfig,
    store_url,
    workspace_dir,
)
from gateway.control.server import (
    ControlServer,
    ControlState,
)
from gateway.delivery import DeliveryFailures, delivery_worker
from gateway.init import RUN_DIR
from gateway.intake import Intake
from gateway.masking import mask_url
from gateway.mcp.reload import McpFiles
from gateway.metrics import GatewayMetrics, MeteredProvider
from gateway.plugins import ChannelPlugins, build_channels
from gateway.process_table import (
    PARENT_FD_ENV,
    SUPERVISED_ENV,
    own_process,
    process_name,
    read_processes,
)
from gateway.provider_detect import ProviderChoice
from gateway.role_readiness import roles_not_ready
from gateway.scheduler_role import SchedulerRole
from gateway.store_watch import StoreWatch
from gateway.supervisor import ChannelSupervisor
from gateway.ui.auth import UiAuth
from gateway.version import package_version

if TYPE_CHECKING:
    from gateway.mcp.mount import AsgiMount

__all__ = [
    "ROLES",
    "SOCKET_FILE",
    "VERSION",
    "WAKE_DIR",
    "GatewayParts",
    "Role",
    "parent_fd",
    "wakeups_for",
]

log = logging.getLogger(__spec__.name if __spec__ is not None else __name__)

SOCKET_FILE = "gateway.sock"
WAKE_DIR = "wake"
"""``<home>/run/wake``: one wake-up socket per process of the gateway."""

Role = Literal["agent", "channels", "scheduler"]
ROLES: tuple[Role, ...] = get_args(Role)


class GatewayParts:
    """One run of the daemon: what was started, so it can stop in reverse (see
    `gateway.serve.Gateway`, its lifecycle)."""

    def __init__(
        self,
        *,
        home: Path,
        config: FamiliarConfig,
        plugins: ChannelPlugins,
        env: Mapping[str, str],
        ollama_url: str,
        roles: frozenset[Role] = frozenset(ROLES),
        channel: str | None = None,
        channel_children: bool = False,
    ) -> None:
        self.roles = roles
        self.single = roles == frozenset(ROLES)
        self.channel = channel
        """The one channel this process runs (a ``channel:<name>`` process), or None."""
        self.isolated: tuple[str, ...] = ()
        """Enabled channels that run in processes of their own, not here."""
        if channel is None and (channel_children or roles == {"channels"}):
            self.isolated = isolated_channels(config, main=channel_children)
        self.children: list[ChannelProcess] = []
        """Those processes, when this (main) process starts them itself."""
        self.channel_children = channel_children
        self.role_name = "single" if self.single else "+".join(sorted(roles))
        if channel_children:
            self.role_name = "main"
        if channel is not None:
            self.role_name = process_name(channel)
        self.started_at = time.time()
        self.home = home
        self.config = config
        self.plugins = plugins
        self.env = env
        self.ollama_url = ollama_url
        self.workspace = workspace_dir(home, config)
        self.store_url = store_url(home, config)
        self.metrics = GatewayMetrics()
        self.cli = CliChannel(config=config.channels.cli)
        self.supervisors: list[ChannelSupervisor] = []
        self.remote: list[RemoteChannel] = []
        """Channels in processes of their own (the front of ``per-channel``)."""
        self.failures: DeliveryFailures | None = None
        self.store: Store | None = None
        self.core: CoreApp | None = None
        self.state: ControlState | None = None
        self.http_app: web.Application | None = None
        self.http_runner: web.AppRunner | None = None
        self.http_site: web.TCPSite | None = None
        self.mcp_mount: AsgiMount | None = None
        self.ui: UiAuth | None = None
        self.mcp_files = McpFiles.of_home(home, self.workspace, config, plugins, env)
        self.control: ControlServer | None = None
        self.listening: set[str] = set()
        """The listeners that accept connections: ``http``, ``control``."""
        self.scheduler: SchedulerRole | None = None
        self.wakeups: WakeupService | None = None
        self.runtime_started = False
        self.stopping = False
        self.watch: StoreWatch | None = None
        self.lost = asyncio.Event()
        """Set when the store is lost for good: the gateway stops and exits 1."""
        self.fatal: int | None = None
        """The exit status a channel process asked the gateway to stop with."""
        self.fatal_set = asyncio.Event()
        self.intake = Intake(self._stop_intake)

    def _channels_here(self) -> list[Channel]:
        """The channels this process runs (built without I/O: a refused config stops
        here); in the front of ``per-channel``, the others are `RemoteChannel`s, known
        from their config alone (not built: their SDKs stay out of the front)."""
        enabled = self.config.channels.enabled()
        if self.channel is None:
            for name in self.isolated:
                self._remote_channel(name, enabled[name].http_routes)
            here = {n: c for n, c in enabled.items() if n not in self.isolated}
            return [self.cli, *build_channels(here, self.plugins)]
        mine = {n: c for n, c in enabled.items() if n == self.channel and n != "cli"}
        if not mine:
            raise ConfigError(
                f"channel {self.channel!r} is not an enabled channel that runs in a "
                "process of its own (cli runs in the channels process)",
                key=f"channels.{self.channel}",
            )
        return build_channels(mine, self.plugins)

    def _remote_channel(self, name: str, routes: tuple[str, ...]) -> None:
        """The front's view of channel ``name`` in its own process; in the main process,
        that process too."""
        if not self.channel_children:
            self.remote.append(RemoteChannel(self.home, name, routes))
            return
        children = self.children

        async def row() -> dict[str, Any] | None:
            return next((c.report().as_json() for c in children if c.channel == name), None)

        remote = RemoteChannel(self.home, name, routes, process_row=row)
        self.remote.append(remote)
        self.children.append(
            ChannelProcess(self.home, name, self.config, remote=remote, on_fatal=self._child_fatal)
        )

    def _child_fatal(self, code: int) -> None:
        self.fatal = code
        self.fatal_set.set()

    def channel_state(self) -> dict[str, Any]:
        """This process's channel as the front reports it."""
        [state] = self.channel_report()
        return state

    async def _deliver_through_outbox(self, message: OutboundMessage) -> None:
        """A check-in for another channel, from a process that does not run it: queued in
        the outbox, delivered by the channels role."""
        assert self.core is not None
        forwarded = message.model_copy(update={"id": f"{message.id}:fwd"[:80]})
        await self.core.bus.publish_outbound(forwarded)

    async def _deliver_elsewhere(self, message: OutboundMessage) -> None:
        """Send a reply through the channel its delivery names (heartbeat check-ins)."""
        for supervisor in self.supervisors:
            if supervisor.name == message.delivery.channel and supervisor.running:
                await supervisor.channel.send(message)
                return
        if message.delivery.channel in self.isolated:  # its own process delivers it
            await self._deliver_through_outbox(message)
            return
        raise LookupError(f"no running channel named {message.delivery.channel!r}")

    def _build_provider(self, choice: ProviderChoice | None) -> Provider | None:
        if choice is None:
            log.info("provider: none (replies will say how to configure one)")
            return None
        cfg = choice.config
        log.info(
            "provider: kind=%s model=%s base_url=%s (from %s)",
            cfg.kind,
            cfg.effective_model,
            mask_url(cfg.effective_base_url) if cfg.effective_base_url else None,
            choice.source,
        )
        provider = build_provider(cfg)
        return MeteredProvider(provider, self.metrics) if provider is not None else None

    async def _start_channels(
        self, core: CoreApp, channels: list[Channel], http: web.Application | None
    ) -> None:
        """Start every channel at once; one that fails is retried, never fatal."""
        services = core
        context = ChannelContext(
            bus=services.bus,
            hub=services.hub,
            unread=services.sessions,
            http=http,
            http_host=self.config.http.host if http is not None else None,
        )

        failures = self.failures = DeliveryFailures(events=core.events)

        def worker(channel: Channel) -> DeliveryWorker:
            send = self.metrics.metered_send(channel.name, channel.send)
            return delivery_worker(channel, bus=services.bus, send=send, failures=failures)

        for channel in channels:
            if isinstance(channel, MeteredChannel):
                self.metrics.registry.register(channel.metrics_collector)

        self.supervisors = [
            ChannelSupervisor(channel, context=context, worker=worker) for channel in channels
        ]
        await asyncio.gather(*(supervisor.start() for supervisor in self.supervisors))

    async def process_report(self) -> list[dict[str, Any]]:
        """The gateway's processes: the supervisor's table, or this process (and the
        channel processes it started)."""
        if self.children:
            me = own_process(self.role_name, self.started_at).as_json()
            return [me, *(child.report().as_json() for child in self.children)]
        if self.env.get(SUPERVISED_ENV):
            table = await read_processes(self.home / RUN_DIR)
            if table is not None:
                return table
        return [own_process(self.role_name, self.started_at).as_json()]

    def channel_report(self) -> list[dict[str, Any]]:
        """Each channel's ``name``, ``state``, ``error``, ``retry_in`` and ``restarts``."""
        failures = self.failures
        here = [
            {**s.as_json(), **(failures.report(s.name) if failures else {})}
            for s in self.supervisors
        ]
        return here + [remote.as_json() for remote in self.remote]

    async def _stop_intake(self) -> None:
        """No new control requests, HTTP deliveries, check-ins, schedule firings or
        channel restarts."""
        for supervisor in self.supervisors:
            await supervisor.stop_retrying()
        for child in self.children:
            child.stop_restarting()
        self.listening.clear()
        if self.control is not None:
            await self.control.stop_listening()
        if self.http_site is not None:
            await self.http_site.stop()
        if self.scheduler is not None:
            await self.scheduler.stop()
        if self.core is not None and self.core.schedules.running:
            await self.core.schedules.stop()

    async def readiness(self) -> list[str]:
        """`not_ready` after checking the store's file afresh (what ``/readyz`` serves)."""
        if self.watch is not None and not self.stopping:
            await self.watch.check()
        supervised = bool(self.env.get(SUPERVISED_ENV)) and self.channel is None
        return self.not_ready() + await roles_not_ready(self.home / RUN_DIR, supervised=supervised)

    def readiness_details(self) -> dict[str, Any]:
        """What ``/readyz`` adds without changing readiness: MCP servers that failed."""
        failing = self.core.mcp.failing() if self.core is not None else []
        return {"mcp_failing": {s.name: s.error for s in failing}} if failing else {}

    def not_ready(self) -> list[str]:
        """Why the gateway is not ready (empty when it is)."""
        reasons: list[str] = []
        if self.watch is not None and self.watch.problem is not None:
            reasons.append(f"store: {self.watch.problem}")
        if self.stopping or self.intake.stopped:
            reasons.append("stopping")
        if self.store is None or self.core is None:
            reasons.append("store not open")
        if "agent" in self.roles and not self.runtime_started:
            reasons.append("agent runtime not started")
        if "channels" not in self.roles:
            return reasons
        if not self.supervisors:
            reasons.append("channels not started")
        reasons += [r for s in self.supervisors if (r := s.not_ready()) is not None]
        reasons += [r for c in self.remote if (r := c.not_ready()) is not None]
        listeners = ("control",) if self.channel is not None else ("control", "http")
        for listener in listeners:
            if listener not in self.listening and (listener != "http" or self.http_app):
                reasons.append(f"{listener} not listening")
        return reasons

    def _status_line(self) -> str:
        if "channels" not in self.roles:
            extra = f" ({self.scheduler.report()})" if self.scheduler else ""
            return f"serving: role {self.role_name}{extra}"
        provider = "none"
        if self.state is not None and self.state.provider is not None:
            cfg = self.state.provider.config
            provider = f"{cfg.kind}/{cfg.effective_model or '?'}"
        http = self.state.http_address if self.state and self.state.http_address else "off"
        here = [f"{s.name} {s.state}" for s in self.supervisors]
        here += [f"{c.name} {c.state} ({c.process})" for c in self.remote]
        return f"serving: channels {', '.join(here)}; provider {provider}; http {http}"


VERSION = package_version()
"""Read on import: the supervisor imports the daemon before it forks the roles, which
share the answer."""


def wakeups_for(store: Store, directory: Path, url: str) -> WakeupService:
    """Unix datagram sockets on SQLite (one host); LISTEN/NOTIFY on PostgreSQL (any)."""
    if store.is_sqlite:
        return SocketWakeups(directory)
    from core.bus.wake_pg import PgWakeups

    return PgWakeups(url, store.schema)


def parent_fd(env: Mapping[str, str]) -> int | None:
    """The read end of the supervisor's pipe, when this process is its child."""
    value = env.get(PARENT_FD_ENV)
    if not value or not value.isdigit():
        return None
    try:
        os.fstat(int(value))
    except OSError:
        return None
    return int(value)
