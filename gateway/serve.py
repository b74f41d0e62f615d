"""One run of the gateway in this process: ``serve`` and its lifecycle (start, serve until
stopped, stop in order)."""

from __future__ import annotations

import asyncio
import importlib.metadata
import logging
import os
import signal
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from aiohttp import web

from channels.base import Channel
from core.app import build_core
from core.errors import ConfigError, FamiliarError
from core.private_files import private_dir
from core.store.engine import Store
from gateway.channel_socket import channel_app, channel_lock, channel_socket, channels_dir
from gateway.collector import settle_after_start
from gateway.config import (
    hooks_dir,
    workspace_dir,
)
from gateway.control.schedules import add_schedule_routes
from gateway.control.server import (
    DEFAULT_BACKLOG,
    ControlServer,
    ControlState,
    build_control_app,
)
from gateway.gateway_parts import (
    ROLES,
    SOCKET_FILE,
    VERSION,
    WAKE_DIR,
    GatewayParts,
    Role,
    parent_fd,
    wakeups_for,
)
from gateway.home_files import SocketPathTaken, check_socket_path, secure_home
from gateway.http_errors import body_checks, store_errors
from gateway.init import RUN_DIR, LoadedHome, ready_home, unusable_home
from gateway.intake import drain_outbox
from gateway.lock import CHANNELS_LOCK_FILE, LOCK_FILE, GatewayLocked, HomeLock
from gateway.logging_setup import setup_logging
from gateway.metrics import add_health_routes
from gateway.process_table import (
    EX_CONFIG,
)
from gateway.provider_detect import OLLAMA_URL, ProviderChoice, choose_provider
from gateway.scheduler_role import SchedulerRole
from gateway.stop_order import DRAIN_SIGNAL
from gateway.store_watch import StoreWatch, start_failed, store_lost_exit
from gateway.system_routes import add_system_routes
from gateway.systemd import sd_notify, watchdog_interval, watchdog_loop
from gateway.ui.app import add_login_route, mount_ui
from gateway.undelivered import delivery_check

__all__ = ["Gateway", "serve"]

log = logging.getLogger(__spec__.name if __spec__ is not None else __name__)


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
    channel_children: bool = False,
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
        channel_children: with no role, start the channels `isolated_channels` names
            as child processes (``gateway.processes = "main"``) instead of running
            them here.

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
        gateway = Gateway(
            home=home,
            config=config,
            plugins=plugins,
            env=os.environ if env is None else env,
            ollama_url=ollama_url,
            roles=roles,
            channel=channel,
            channel_children=channel_children and role is None,
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


class Gateway(GatewayParts):
    """One run of the daemon: its lifecycle."""

    async def run(self, stop: asyncio.Event | None) -> int:
        loop = asyncio.get_running_loop()
        own_signals = stop is None
        stop = stop or asyncio.Event()
        if own_signals:
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, stop.set)
            loop.add_signal_handler(DRAIN_SIGNAL, self.intake.stop_soon)  # the supervisor's
        parent = parent_fd(self.env)
        if parent is not None:  # the supervisor went away: stop too
            loop.add_reader(parent, stop.set)
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
            if parent is not None:
                loop.remove_reader(parent)
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
        waits = [
            asyncio.create_task(stop.wait()),
            asyncio.create_task(self.lost.wait()),
            asyncio.create_task(self.fatal_set.wait()),
        ]
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in waits:
                task.cancel()
        if self.lost.is_set():
            return store_lost_exit(self.watch, self.env)
        if self.fatal is not None:
            return self.fatal
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
        self.wakeups = wakeups_for(self.store, self.home / RUN_DIR / WAKE_DIR, self.store_url)
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
            group=self.config.group,
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
        if self.single or "scheduler" in self.roles:
            self.scheduler = SchedulerRole(
                core=self.core,
                store=self.store,
                config=self.config.scheduler,
                workspace=self.workspace,
                # one process runs everything: nobody else fires, so no lease to hold
                deliver=self._deliver_elsewhere if self.single else self._deliver_through_outbox,
                wakeups=None if self.single else self.wakeups,
            )
            await self.scheduler.start()
        if "channels" in self.roles:
            if self.core.group is not None and self.channel is None:  # one per gateway
                await self.core.group.start(
                    version=VERSION, channels=sorted(self.config.channels.enabled())
                )
            await self._start_listeners()

    async def _start_channel_process(self, channels: list[Channel]) -> None:
        """A ``channel:<name>`` process: its channel and delivery, its private socket."""
        assert self.core is not None
        await self.core.bus.release_dead_senders()
        self.http_app = channel_app(self.channel_state)
        http = self.http_app if self.config.http.enabled else None
        await self._start_channels(self.core, channels, http)

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
            self.ui = mount_ui(self.http_app, home=self.home, config=self.config.ui)
        for remote in self.remote:
            await remote.start()
        for child in self.children:
            await child.start()
        self.state = ControlState(
            home=self.home,
            workspace=self.workspace,
            config=self.config,
            core=self.core,
            cli=self.cli,
            ui=self.ui_channel,
            provider=choice,
            version=VERSION,
            store_url=self.store_url,
            channels=self.channel_report,
            processes=self.process_report,
            runs_agent="agent" in self.roles,
        )
        await self._start_channels(self.core, channels, self.http_app)

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
                self.state,
                extra_routes=[
                    lambda app: add_schedule_routes(app, schedules, check),
                    lambda app: add_login_route(app, lambda: self.ui),
                    lambda app: add_system_routes(app, self.home, self.config, self.core),
                ],
            ),
            self.home / RUN_DIR / SOCKET_FILE,
        )
        # The HTTP app's start-up (e.g. the panel's templates) runs before the control
        # socket answers, so that HTTP listens a moment after it, not seconds.
        await self._prepare_http()
        await self.control.start()
        self.listening.add("control")
        log.info("control socket %s", self.control.path)
        # Last: /readyz (served here) must not answer before every listener is up.
        await self._start_http()

    async def _prepare_http(self) -> None:
        if self.http_app is None or self.state is None:
            return
        self.http_runner = web.AppRunner(self.http_app, access_log=None, shutdown_timeout=5.0)
        await self.http_runner.setup()

    async def _start_http(self) -> None:
        if self.http_runner is None or self.state is None:
            return
        http = self.config.http
        # aiohttp's default backlog (128) drops the SYNs of a larger burst of webhook
        # callers, and each of those waits a second for TCP's retransmission.
        self.http_site = web.TCPSite(
            self.http_runner, http.host, http.port, backlog=DEFAULT_BACKLOG
        )
        await self.http_site.start()
        self.listening.add("http")
        host, port = self.http_runner.addresses[0][:2]
        self.state.http_address = f"{host}:{port}"
        if self.ui is not None:
            self.ui.listening_on(http.host, port)
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
        # Waiting control clients get "timeout": the reply is kept.
        await self.cli.stop()
        await self.ui_channel.stop()
        if self.control is not None:
            await self.control.close()
        if self.http_runner is not None:
            await self.http_runner.cleanup()
        if self.mcp_mount is not None:
            await self.mcp_mount.stop()
        for remote in self.remote:
            await remote.stop()
        await asyncio.gather(*(child.stop() for child in self.children))
        for supervisor in self.supervisors:
            await supervisor.stop()
