"""The gateway daemon: composition root and lifecycle (``familiar gateway``)."""

from __future__ import annotations

import argparse
import asyncio
import importlib.metadata
import logging
import os
import signal
import sys
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, get_args

from aiohttp import web

from channels.base import Channel, ChannelContext, MeteredChannel
from channels.cli import CliChannel
from core.app import CoreApp, build_core
from core.bus.delivery import DeliveryWorker
from core.bus.owner import make_owner, owner_is_dead
from core.bus.wake_socket import SocketWakeups
from core.bus.wakeups import WakeupService
from core.errors import ConfigError, FamiliarError
from core.messages import OutboundMessage
from core.private_files import private_dir
from core.providers.base import Provider
from core.providers.factory import build_provider
from core.scheduling import HeartbeatService
from core.scheduling.leader import SchedulerLeader
from core.store.engine import Store
from core.store.leases import Leases
from gateway.channel_proxy import RemoteChannel
from gateway.channel_socket import channel_app, channel_lock, channel_socket, channels_dir
from gateway.collector import settle_after_start
from gateway.config import (
    FamiliarConfig,
    default_home,
    hooks_dir,
    store_url,
    workspace_dir,
)
from gateway.control.schedules import add_schedule_routes
from gateway.control.server import (
    DEFAULT_BACKLOG,
    ControlServer,
    ControlState,
    build_control_app,
)
from gateway.delivery import DeliveryFailures, delivery_worker
from gateway.home_files import SocketPathTaken, check_socket_path, secure_home
from gateway.http_errors import body_checks, store_errors
from gateway.init import RUN_DIR, LoadedHome, ready_home, unusable_home
from gateway.intake import Intake, drain_outbox
from gateway.lock import CHANNELS_LOCK_FILE, LOCK_FILE, GatewayLocked, HomeLock
from gateway.logging_setup import setup_logging
from gateway.masking import mask_url
from gateway.mcp.reload import McpFiles
from gateway.metrics import GatewayMetrics, MeteredProvider, add_health_routes
from gateway.plugins import ChannelPlugins, build_channels
from gateway.process_table import (
    EX_CONFIG,
    PARENT_FD_ENV,
    SUPERVISED_ENV,
    own_process,
    process_name,
    read_processes,
)
from gateway.provider_detect import OLLAMA_URL, ProviderChoice, choose_provider
from gateway.role_readiness import roles_not_ready
from gateway.stop_order import DRAIN_SIGNAL
from gateway.store_migration import migrate_store
from gateway.store_watch import StoreWatch, start_failed, store_lost_exit
from gateway.supervisor import ChannelSupervisor
from gateway.systemd import sd_notify, watchdog_interval, watchdog_loop
from gateway.undelivered import delivery_check
from gateway.version import package_version

if TYPE_CHECKING:
    from gateway.mcp.mount import AsgiMount

__all__ = [
    "CHANNELS_LOCK_FILE",
    "EX_CONFIG",
    "LOCK_FILE",
    "PARENT_FD_ENV",
    "ROLES",
    "SOCKET_FILE",
    "WAKE_DIR",
    "GatewayLocked",
    "Role",
    "main",
    "run_gateway",
    "serve",
]

# Named by the module spec so that ``python -m gateway.daemon`` logs as gateway.daemon too.
log = logging.getLogger(__spec__.name if __spec__ is not None else __name__)

SOCKET_FILE = "gateway.sock"
WAKE_DIR = "wake"
"""``<home>/run/wake``: one wake-up socket per process of the gateway."""

Role = Literal["agent", "channels", "scheduler"]
ROLES: tuple[Role, ...] = get_args(Role)


def run_gateway(
    home: Path,
    role: Role | None = None,
    channel: str | None = None,
    *,
    loaded: LoadedHome | None = None,
) -> int:
    """Run the daemon in the foreground until SIGTERM/SIGINT; returns the exit status.

    Without ``role``, what ``gateway.processes`` says: the supervisor of the role
    processes (``multi``) or everything in this process (``single``). With a role,
    that role alone (``familiar gateway --role ...``); with ``channel`` (``--role channels
    --channel NAME``), that one channel in a process of its own (``per-channel``).

    0 after a clean stop, 78 (EX_CONFIG) for bad configuration, 1 for other failures
    to start (another gateway on this home, unreachable or damaged store...) and when
    the database file is lost while serving. ``loaded``: the home as the supervisor
    prepared it (a role it forked), used instead of reading it again; the single
    process uses the one the supervisor's check read.
    """
    if role is None and channel is None:
        from gateway.processes import supervise_or_none

        outcome = supervise_or_none(home)
        if isinstance(outcome, int):
            return outcome
        loaded = outcome  # gateway.processes = "single": everything runs here
    return asyncio.run(serve(home, role=role, channel=channel, loaded=loaded))


async def serve(
    home: Path,
    *,
    stop: asyncio.Event | None = None,
    env: Mapping[str, str] | None = None,
    ollama_url: str = OLLAMA_URL,
    config_overrides: Mapping[str, Any] | None = None,
    entry_points: Iterable[importlib.metadata.EntryPoint] | None = None,
    role: Role | None = None,
    channel: str | None = None,
    loaded: LoadedHome | None = None,
) -> int:
    """Start every part of the gateway, serve until stopped, shut down gracefully.

    Args:
        home: the familiar home; a missing ``config.toml`` is written with defaults.
        stop: set it to stop the gateway. When None, SIGTERM and SIGINT stop it
            (signal handlers are only installed then).
        env: the environment for provider auto-detection (default ``os.environ``).
        ollama_url: where to look for a local Ollama when auto-detecting.
        config_overrides: settings that win over config.toml and the environment,
            by section (e.g. ``{"http": {"port": 0}}``).
        entry_points: the ``familiar.channels`` entry points to load channel
            plugins from (default: the installed ones).
        role: run only this role (a child of the supervisor, or a unit per role);
            None runs every part in this process (``gateway.processes = "single"``).
        channel: run only this channel (``channel_processes = "per-channel"``: the
            ``channel:<name>`` process); implies the ``channels`` role.
        loaded: the home's plugins and configuration as the supervisor prepared them
            (a forked role); used when it is this home, instead of reading them again.

    Returns:
        The process exit status (see `run_gateway`).
    """
    home = await asyncio.to_thread(_absolute, home)
    try:
        loaded = await ready_home(
            home, loaded, entry_points=entry_points, overrides=config_overrides
        )
    except (ConfigError, OSError) as exc:
        return unusable_home(home, exc)
    plugins, config = loaded.plugins, loaded.config
    setup_logging(config.log)
    for reason in plugins.broken.values():
        log.warning("%s", reason)
    if channel is not None:
        role = "channels"
    roles = frozenset(ROLES) if role is None else frozenset({role})
    paths, socket_path = _locks_and_socket(home, role, channel)
    locks = [HomeLock(path) for path in paths]
    try:
        await asyncio.to_thread(secure_home, home, workspace_dir(home, config))
        await asyncio.to_thread(private_dir, channels_dir(home))
        for lock in locks:
            await asyncio.to_thread(lock.acquire, home)
        if socket_path is not None:
            await asyncio.to_thread(check_socket_path, socket_path)
    except (GatewayLocked, SocketPathTaken, OSError) as exc:
        for lock in locks:
            await asyncio.to_thread(lock.release)
        _fail(str(exc))
        return 1
    try:
        gateway = _Gateway(
            home=home,
            config=config,
            plugins=plugins,
            env=os.environ if env is None else env,
            ollama_url=ollama_url,
            roles=roles,
            channel=channel,
        )
        return await gateway.run(stop)
    finally:
        for lock in locks:
            await asyncio.to_thread(lock.release)


def _locks_and_socket(
    home: Path, role: Role | None, channel: str | None
) -> tuple[list[Path], Path | None]:
    """The lock files this process holds and the socket it serves: one gateway
    (supervisor or single process) per home, one control socket owner, and one process
    per channel that runs in its own."""
    paths = [home / RUN_DIR / LOCK_FILE] if role is None else []
    if channel is not None:
        return [*paths, channel_lock(home, channel)], channel_socket(home, channel)
    if role in (None, "channels"):
        paths.append(home / RUN_DIR / CHANNELS_LOCK_FILE)
        return paths, home / RUN_DIR / SOCKET_FILE
    return paths, None


def _absolute(home: Path) -> Path:
    return home.expanduser().absolute()


def _fail(message: str) -> None:
    """The one line a failed start prints (no traceback, whatever the cause)."""
    print(f"familiar: {' '.join(message.split())}", file=sys.stderr)


class _Gateway:
    """One run of the daemon: what was started, in order, so it can stop in reverse."""

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
    ) -> None:
        self.roles = roles
        self.single = roles == frozenset(ROLES)
        self.channel = channel
        """The one channel this process runs (a ``channel:<name>`` process), or None."""
        self.per_channel = config.gateway.per_channel and not self.single and channel is None
        """The front of ``per-channel``: the cli here, every other channel elsewhere."""
        self.role_name = "single" if self.single else "+".join(sorted(roles))
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
        self.mcp_files = McpFiles.of_home(home, self.workspace, config, plugins, env)
        self.control: ControlServer | None = None
        self.listening: set[str] = set()
        """The listeners that accept connections: ``http``, ``control``."""
        self.heartbeat: HeartbeatService | None = None
        self.wakeups: WakeupService | None = None
        self.leader: SchedulerLeader | None = None
        self.runtime_started = False
        self.stopping = False
        self.watch: StoreWatch | None = None
        self.lost = asyncio.Event()
        """Set when the store is lost for good: the gateway stops and exits 1."""
        self.intake = Intake(self._stop_intake)

    # -- lifecycle -----------------------------------------------------------------------

    async def run(self, stop: asyncio.Event | None) -> int:
        loop = asyncio.get_running_loop()
        own_signals = stop is None
        stop = stop or asyncio.Event()
        if own_signals:
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, stop.set)
            loop.add_signal_handler(DRAIN_SIGNAL, self.intake.stop_soon)  # the supervisor's
        parent_fd = _parent_fd(self.env)
        if parent_fd is not None:  # the supervisor went away: stop too
            loop.add_reader(parent_fd, stop.set)
        watchdog_stop = asyncio.Event()
        watchdog: asyncio.Task[None] | None = None
        interval = watchdog_interval()
        if interval is not None:
            watchdog = asyncio.create_task(watchdog_loop(interval, watchdog_stop))
        code = 0
        try:
            sd_notify("STATUS=starting")
            try:
                await self._start()
            except ConfigError as exc:
                print(f"familiar: {exc}", file=sys.stderr)
                code = EX_CONFIG
            except (FamiliarError, OSError) as exc:
                code = start_failed(exc, self.env)
            if code == 0:
                code = await self._serve_ready(stop, own_process=own_signals)
        finally:
            await self._shutdown()
            watchdog_stop.set()
            if watchdog is not None:
                await watchdog
            if own_signals:
                for sig in (signal.SIGTERM, signal.SIGINT, DRAIN_SIGNAL):
                    loop.remove_signal_handler(sig)
            if parent_fd is not None:
                loop.remove_reader(parent_fd)
        return code

    async def _serve_ready(self, stop: asyncio.Event, *, own_process: bool) -> int:
        """Announce readiness, then serve until stopped.

        ``own_process``: the process is the gateway's (not a test's or an embedder's),
        so its garbage collector is the gateway's to tune.
        """
        sd_notify(f"READY=1\nSTATUS={self._status_line()}")
        log.info("gateway ready: %s", self._status_line())
        if own_process:
            settle_after_start()
        return await self._serve_until(stop)

    async def _serve_until(self, stop: asyncio.Event) -> int:
        """Wait for ``stop`` (exit 0) or for the store to be lost (`store_lost_exit`)."""
        waits = [asyncio.create_task(stop.wait()), asyncio.create_task(self.lost.wait())]
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in waits:
                task.cancel()
        if self.lost.is_set():
            return store_lost_exit(self.watch, self.env)
        log.info("stopping")
        return 0

    async def _start(self) -> None:
        # Plugins build their channels without I/O: a refused config stops us here, before
        # anything is opened (exit 78).
        channels: list[Channel] = []
        if "channels" in self.roles:
            channels = self._channels_here()
        self.store = Store(url=self.store_url, config=self.config.store)
        await self.store.open()
        self.watch = StoreWatch(store=self.store, on_fatal=lambda _: self.lost.set())
        self.watch.start()
        self.wakeups = _wakeups(self.store, self.home / RUN_DIR / WAKE_DIR, self.store_url)
        await self.wakeups.start()
        if "channels" in self.roles and self.channel is None:
            self.metrics.accept_from(self.wakeups)  # /metrics is served here
        else:
            self.metrics.forward_to(self.wakeups)
        choice = None
        if self.roles & {"agent", "channels"}:
            choice = await choose_provider(
                self.config.provider, self.env, ollama_url=self.ollama_url
            )
        provider = self._build_provider(choice) if "agent" in self.roles else None
        self.core = await build_core(
            store_url=self.store_url,
            workspace=self.workspace,
            agent=self.config.agent,
            tools=self.config.tools,
            provider=provider,
            scheduler=self.config.scheduler,
            store=self.store,
            memory=self.config.memory,
            model=choice.config.effective_model if choice is not None else None,
            hooks=self.config.hooks,
            hooks_dir=hooks_dir(self.home),
            # MCP servers run with the turns: only the agent role reads (and imports) them.
            mcp=await asyncio.to_thread(self.mcp_files.load) if "agent" in self.roles else None,
            home=self.home,
            models=self.config.models,
            wakeups=self.wakeups,
            skills=self.config.skills,
        )
        if self.channel is not None:
            await self._start_channel_process(channels)
        elif "channels" in self.roles:
            await self._start_front(choice, channels)
        if "agent" in self.roles:
            if self.single:
                await self.core.start()  # the schedules too: one process runs everything
            else:
                await self.core.start_agent()
            self.runtime_started = True
            self.mcp_files.watch(self.core.mcp)
        if self.single:
            self.heartbeat = self._heartbeat(self._deliver_elsewhere)
            await self.heartbeat.start()
        elif "scheduler" in self.roles:
            self._start_leader()
        if "channels" in self.roles:
            await self._start_listeners()

    def _channels_here(self) -> list[Channel]:
        """The channels this process runs (built without I/O: a refused config stops
        here); in the front of ``per-channel``, the others are `RemoteChannel`s, known
        from their config alone (not built: their SDKs stay out of the front)."""
        enabled = self.config.channels.enabled()
        if self.per_channel:
            self.remote = [
                RemoteChannel(self.home, name, config.http_routes)
                for name, config in enabled.items()
                if name != "cli"
            ]
            return [self.cli]
        if self.channel is None:
            return [self.cli, *build_channels(enabled, self.plugins)]
        mine = {n: c for n, c in enabled.items() if n == self.channel and n != "cli"}
        if not mine:
            raise ConfigError(
                f"channel {self.channel!r} is not an enabled channel that runs in a "
                "process of its own (cli runs in the channels process)",
                key=f"channels.{self.channel}",
            )
        return build_channels(mine, self.plugins)

    async def _start_channel_process(self, channels: list[Channel]) -> None:
        """A ``channel:<name>`` process: its channel and delivery, its private socket."""
        assert self.core is not None
        await self.core.bus.release_dead_senders()
        self.http_app = channel_app(self.channel_state)
        http = self.http_app if self.config.http.enabled else None
        await self._start_channels(self.core, channels, http)

    def channel_state(self) -> dict[str, Any]:
        """This process's channel as the front reports it."""
        [state] = self.channel_report()
        return state

    async def _start_front(self, choice: ProviderChoice | None, channels: list[Channel]) -> None:
        """The channels role: channels and their delivery, the control API's state."""
        assert self.core is not None
        # Replies a killed sender of this host held are sent again now, not when its
        # lease runs out.
        await self.core.bus.release_dead_senders()
        await self.metrics.start_tail(self.core.bus, self.core.events)
        if self.config.http.enabled:
            self.http_app = web.Application(
                middlewares=[store_errors, body_checks(too_large_hint="send a smaller body")]
            )
            add_health_routes(
                self.http_app,
                metrics=self.metrics,
                bus=self.core.bus,
                events=self.core.events,
                not_ready=self.readiness,
                details=self.readiness_details,
                processes=self.process_report,
            )
            if self.config.mcp.server.enabled:
                # The MCP server SDK is imported only by a gateway that serves /mcp.
                from gateway.mcp.endpoint import mount_mcp_endpoint

                self.mcp_mount = await mount_mcp_endpoint(
                    self.http_app, home=self.home, config=self.config
                )
            for remote in self.remote:
                remote.mount(self.http_app)
        for remote in self.remote:
            await remote.start()
        self.state = ControlState(
            home=self.home,
            workspace=self.workspace,
            config=self.config,
            core=self.core,
            cli=self.cli,
            provider=choice,
            version=_VERSION,
            store_url=self.store_url,
            channels=self.channel_report,
            processes=self.process_report,
            runs_agent="agent" in self.roles,
        )
        await self._start_channels(self.core, channels, self.http_app)

    def _heartbeat(self, deliver: Callable[[OutboundMessage], Awaitable[None]]) -> HeartbeatService:
        assert self.core is not None and self.store is not None
        return HeartbeatService(
            config=self.config.scheduler.heartbeat,
            scheduler=self.core.schedules,
            bus=self.core.bus,
            store=self.store,
            workspace=self.workspace,
            deliver=deliver,
        )

    def _start_leader(self) -> None:
        """The scheduler role: fire schedules only while holding the leader lease."""
        assert self.core is not None and self.store is not None and self.wakeups is not None
        core = self.core
        heartbeat = self._heartbeat(self._deliver_through_outbox)

        async def lead() -> None:
            await core.schedules.start()
            await heartbeat.start()
            self.heartbeat = heartbeat

        async def follow() -> None:
            self.heartbeat = None
            await heartbeat.stop()
            await core.schedules.stop()

        self.leader = SchedulerLeader(
            leases=Leases(store=self.store),
            owner=make_owner(),
            seconds=self.config.scheduler.leader_lease,
            lead=lead,
            follow=follow,
            resync=core.schedules.resync,
            is_dead=owner_is_dead,
        )
        self.wakeups.on("schedules", lambda _data, _peer: self._poke_leader())
        self.leader.start()

    def _poke_leader(self) -> None:
        if self.leader is not None:
            self.leader.poke()

    async def _deliver_through_outbox(self, message: OutboundMessage) -> None:
        """A check-in for another channel, from a process that does not run it: queued in
        the outbox, delivered by the channels role."""
        assert self.core is not None
        forwarded = message.model_copy(update={"id": f"{message.id}:fwd"[:80]})
        await self.core.bus.publish_outbound(forwarded)

    async def _start_listeners(self) -> None:
        if self.channel is not None:
            assert self.http_app is not None
            self.control = ControlServer(self.http_app, channel_socket(self.home, self.channel))
            await self.control.start()
            self.listening.add("control")
            log.info("channel %s serving on %s", self.channel, self.control.path)
            return
        assert self.core is not None and self.state is not None
        schedules, check = self.core.schedules, delivery_check(self.config.channels)
        self.control = ControlServer(
            build_control_app(
                self.state, extra_routes=[lambda app: add_schedule_routes(app, schedules, check)]
            ),
            self.home / RUN_DIR / SOCKET_FILE,
        )
        await self.control.start()
        self.listening.add("control")
        log.info("control socket %s", self.control.path)
        # Last: /readyz (served here) must not answer before every listener is up.
        await self._start_http()

    async def _deliver_elsewhere(self, message: OutboundMessage) -> None:
        """Send a reply through the channel its delivery names (heartbeat check-ins)."""
        for supervisor in self.supervisors:
            if supervisor.name == message.delivery.channel and supervisor.running:
                await supervisor.channel.send(message)
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
        """The gateway's processes: the supervisor's table, or this process alone."""
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

    async def _start_http(self) -> None:
        if self.http_app is None or self.state is None:
            return
        http = self.config.http
        self.http_runner = web.AppRunner(self.http_app, access_log=None, shutdown_timeout=5.0)
        await self.http_runner.setup()
        # aiohttp's default backlog (128) drops the SYNs of a larger burst of webhook
        # callers, and each of those waits a second for TCP's retransmission.
        self.http_site = web.TCPSite(
            self.http_runner, http.host, http.port, backlog=DEFAULT_BACKLOG
        )
        await self.http_site.start()
        self.listening.add("http")
        host, port = self.http_runner.addresses[0][:2]
        self.state.http_address = f"{host}:{port}"
        log.info("http listening on %s", self.state.http_address)
        if (exposed := http.exposure(port)) is not None:
            log.warning("%s", exposed)

    async def _shutdown(self) -> None:
        self.stopping = True
        busy = self.core.runtime.busy_sessions if self.core and self.runtime_started else 0
        sd_notify(f"STOPPING=1\nSTATUS=stopping: finishing {busy} running turn(s)")
        if self.core is not None or self.listening:  # (a start that failed took nothing in)
            await self.intake.stop()
        await self.mcp_files.stop()
        if self.core is not None and self.runtime_started:
            await self.core.runtime.stop(grace=self.config.agent.shutdown_grace)
        if self.core is not None and self.supervisors and not self.lost.is_set():
            # (when lost, nothing reads the outbox)
            await drain_outbox(self.core.bus, [s.name for s in self.supervisors if s.running])
        await self._close_channels()
        if self.watch is not None:
            await self.watch.stop()
        if self.core is not None:
            await self.core.stop(grace=0)
            log.info("stopped role=%s", self.role_name)
        elif self.store is not None:
            await self.store.close()
        if self.wakeups is not None:
            await self.wakeups.stop()

    async def _close_channels(self) -> None:
        """Close the control socket, the HTTP port, MCP and every channel (last)."""
        await self.cli.stop()  # waiting control clients get "timeout": the reply is kept
        if self.control is not None:
            await self.control.close()
        if self.http_runner is not None:
            await self.http_runner.cleanup()
        if self.mcp_mount is not None:
            await self.mcp_mount.stop()
        for remote in self.remote:
            await remote.stop()
        for supervisor in self.supervisors:
            await supervisor.stop()

    async def _stop_intake(self) -> None:
        """No new control requests, HTTP deliveries, check-ins, schedule firings or
        channel restarts."""
        for supervisor in self.supervisors:
            await supervisor.stop_retrying()
        self.listening.clear()
        if self.control is not None:
            await self.control.stop_listening()
        if self.http_site is not None:
            await self.http_site.stop()
        if self.leader is not None:
            await self.leader.stop()
        if self.heartbeat is not None:
            await self.heartbeat.stop()
        if self.core is not None and self.core.schedules.running:
            await self.core.schedules.stop()

    # -- reporting -----------------------------------------------------------------------

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
            leading = self.leader is not None and self.leader.leading
            extra = f" (leader: {'yes' if leading else 'no'})" if self.leader else ""
            return f"serving: role {self.role_name}{extra}"
        provider = "none"
        if self.state is not None and self.state.provider is not None:
            cfg = self.state.provider.config
            provider = f"{cfg.kind}/{cfg.effective_model or '?'}"
        http = self.state.http_address if self.state and self.state.http_address else "off"
        here = [f"{s.name} {s.state}" for s in self.supervisors]
        here += [f"{c.name} {c.state} ({c.process})" for c in self.remote]
        return f"serving: channels {', '.join(here)}; provider {provider}; http {http}"


_VERSION = package_version()
"""Read on import: the supervisor imports the daemon before it forks the roles, which
share the answer."""


def _wakeups(store: Store, directory: Path, url: str) -> WakeupService:
    """Unix datagram sockets on SQLite (one host); LISTEN/NOTIFY on PostgreSQL (any)."""
    if store.is_sqlite:
        return SocketWakeups(directory)
    from core.bus.wake_pg import PgWakeups

    return PgWakeups(url)


def _parent_fd(env: Mapping[str, str]) -> int | None:
    """The read end of the supervisor's pipe, when this process is its child."""
    value = env.get(PARENT_FD_ENV)
    if not value or not value.isdigit():
        return None
    try:
        os.fstat(int(value))
    except OSError:
        return None
    return int(value)


def main(argv: list[str] | None = None, *, loaded: LoadedHome | None = None) -> None:
    """``python -m gateway.daemon [--home DIR] [--role ROLE [--channel NAME] | --migrate]``:
    run in the foreground (``loaded``: see `run_gateway`)."""
    parser = argparse.ArgumentParser(prog="python -m gateway.daemon", description=__doc__)
    parser.add_argument("--home", type=Path, default=None, help="familiar home directory")
    parser.add_argument("--role", choices=ROLES, default=None, help="run only this role")
    parser.add_argument(
        "--channel", default=None, help="with --role channels: run only this channel"
    )
    parser.add_argument(
        "--migrate",
        action="store_true",
        help="only bring the store to the newest migration, then exit (the supervisor does)",
    )
    args = parser.parse_args(argv)
    if args.channel is not None and args.role != "channels":
        parser.error("--channel needs --role channels")
    if args.migrate:
        if args.role is not None:
            parser.error("--migrate runs no role")
        sys.exit(asyncio.run(migrate_store(_absolute(args.home or default_home()), loaded)))
    home = args.home or default_home()
    sys.exit(run_gateway(home, role=args.role, channel=args.channel, loaded=loaded))


if __name__ == "__main__":
    main()
