"""The supervisor of the role processes (``gateway.processes = "multi"``).

``familiar gateway`` starts the roles as child processes (``python -m gateway.daemon
--role ROLE``): one ``channels`` (the channels, the control socket and HTTP), one
``scheduler`` (fires only while it holds the leader lease) and ``gateway.agent_workers``
``agent`` workers. The bus and the store are the only state they share.

- A child that dies is restarted: at once after a long run, else after a backoff
  that doubles from 0.5 s up to ``gateway.restart_backoff_max``. One that died
  ``gateway.crash_loop_restarts`` times in a row, each soon after its start, is
  reported ``crash-loop`` (log, ``familiar status``, systemd ``STATUS=``) and keeps
  being retried at the longest backoff; the supervisor and the other roles stay up.
- Children report to the supervisor with the sd_notify protocol on a socket of its
  own: ``READY=1`` once started, ``WATCHDOG=1`` every few seconds from their event
  loop. A child whose loop stops pinging is killed and restarted.
- Only the supervisor talks to systemd: ``READY=1`` once every child is ready,
  ``WATCHDOG=1`` only while every child is healthy, ``STATUS=`` with the summary.
- SIGTERM or SIGINT stops the children in order (`gateway.stop_order`): the front
  stops taking messages in, the agent workers finish their turns within
  ``agent.shutdown_grace``, then the channels deliver those replies and stop; it exits
  0. Children also stop by themselves when the supervisor vanishes (they watch a pipe
  it holds open).
- A child that exits with 78 (bad configuration) before it was ever ready stops the
  supervisor with 78: restarting cannot fix a config file.
- Before the roles, a process forked for that alone brings the store to the newest
  migration and exits (`gateway.store_migration`), so no role keeps alembic.
- Children are forked by the zygote (`gateway.zygote`) from the daemon's already
  imported code, so they start in a fraction of an interpreter's start and share those
  pages; the supervisor is their parent all the same (a child subreaper,
  `gateway.reaper`). Without the zygote (it died, or this kernel has no subreapers) a
  child is started as ``python -m gateway.daemon --role ROLE``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import struct
import sys
import time
import uuid
from collections.abc import Callable
from functools import partial
from pathlib import Path

from core.errors import ConfigError
from core.store.sqlite_file import sqlite_path
from core.store.warm import warm_up
from gateway.child_exits import describe_exit, fatal_exit, migration_exit, plan_restart
from gateway.config import FamiliarConfig, store_url, workspace_dir
from gateway.config_check import check_complete
from gateway.home_files import secure_home
from gateway.init import RUN_DIR, LoadedHome, load_home, unusable_home
from gateway.lock import LOCK_FILE, GatewayLocked, HomeLock
from gateway.logging_setup import LogConfig, setup_logging
from gateway.process_table import (
    PARENT_FD_ENV,
    STORE_LOST_FIELD,
    SUPERVISED_ENV,
    write_processes,
)
from gateway.reaper import ChildReaper, become_subreaper
from gateway.role_children import RoleChild, first_of, role_children
from gateway.stop_order import stop_in_order
from gateway.systemd import sd_notify, watchdog_interval
from gateway.zygote import Zygote, ZygoteGone

__all__ = ["CHILD_WATCHDOG_SECONDS", "Supervisor", "supervise_or_none"]

log = logging.getLogger(__name__)

CHILD_WATCHDOG_SECONDS = 10.0
"""The watchdog period children are given: they ping every half of it."""
_HUNG_AFTER = 3 * CHILD_WATCHDOG_SECONDS
"""A ready child silent this long has a stuck event loop: it is killed."""
_READY_TIMEOUT = 120.0
"""How long the supervisor waits for the channels role before starting the others."""
_CREDS = struct.Struct("3i")


def supervise_or_none(home: Path, role_main: Callable[..., None]) -> int | LoadedHome:
    """Run the supervisor until stopped when the config says ``multi``.

    ``role_main``: what a forked role runs (``gateway.daemon.main``, called with its
    argv and ``loaded=``); passed in, so that this module does not import the daemon.

    Returns:
        The exit status; or, when ``gateway.processes`` is ``main`` or ``single``, the
        home as read here (the caller runs the gateway in this process, with it).
    """
    home = home.expanduser().absolute()
    setup_logging(LogConfig())
    try:
        loaded = load_home(home)
        check_complete(loaded.config)
    except (ConfigError, OSError) as exc:
        return unusable_home(home, exc)
    config = loaded.config
    if config.gateway.processes != "multi":
        return loaded
    setup_logging(config.log)
    supervisor = Supervisor(home, config)
    if become_subreaper():
        # The daemon is imported before the fork (by the caller of role_main), so the
        # zygote and every role share those pages.
        if sqlite_path(store_url(home, config)) is not None:
            warm_up()  # the roles' store code runs once here, so they share what it writes
        supervisor.zygote = Zygote.fork(
            partial(role_main, loaded=loaded), close_fds=(supervisor.parent_w,)
        )
    return asyncio.run(supervisor.run())


class Supervisor:
    """Starts, watches, restarts and stops the role processes of one home.

    Args:
        home: the familiar home (absolute).
        config: its configuration (``gateway`` section: workers, backoff).
        python: the interpreter the children run under.
    """

    def __init__(self, home: Path, config: FamiliarConfig, *, python: str = sys.executable):
        self.home = home
        self.config = config
        self.python = python
        self.run_dir = home / RUN_DIR
        self.children = role_children(config)
        self.stopping, self.exit_code, self.started_at = False, 0, time.time()
        self._stop = asyncio.Event()
        self._changed = asyncio.Event()
        self._writing = asyncio.Lock()
        self._notify: socket.socket | None = None
        self._notify_name = f"@familiar-supervisor/{os.getpid()}/{uuid.uuid4().hex[:8]}"
        # Children watch the read end: it reads EOF once the supervisor is gone. Made
        # before the zygote is forked (which closes the write end), inherited by every child.
        self._parent_r, self.parent_w = os.pipe()
        os.set_inheritable(self._parent_r, True)
        self.zygote: Zygote | None = None
        self.reaper = ChildReaper()
        self._announced_ready = False
        self._tasks: list[asyncio.Task[None]] = []

    # -- the run ---------------------------------------------------------------------------

    async def run(self) -> int:
        lock = HomeLock(self.run_dir / LOCK_FILE)
        try:
            await asyncio.to_thread(secure_home, self.home, workspace_dir(self.home, self.config))
            await asyncio.to_thread(lock.acquire, self.home)
        except (GatewayLocked, OSError) as exc:
            print(f"familiar: {' '.join(str(exc).split())}", file=sys.stderr)
            self._close_pipe()
            return 1
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._stop.set)
        self.reaper.start()
        if self.zygote is not None:
            self.reaper.watch(self.zygote.pid)
        try:
            self._open_notify()
            sd_notify("STATUS=starting the role processes")
            await self._serve()
        finally:
            await self._shutdown()  # a second SIGTERM meanwhile changes nothing
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.remove_signal_handler(sig)
            self.reaper.stop()
            await asyncio.to_thread(lock.release)
        return self.exit_code

    async def _serve(self) -> None:
        await self._migrate()
        if self._stop.is_set():
            return
        channels, others = self.children[0], self.children[1:]
        self._tasks.append(asyncio.create_task(self._keep(channels), name="keep-channels"))
        # The channels role opens the store first, and takes messages in.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(_READY_TIMEOUT):
                await first_of(channels.became_ready.wait(), self._stop.wait())
        if not self._stop.is_set():
            for child in others:
                self._tasks.append(
                    asyncio.create_task(self._keep(child), name=f"keep-{child.name}")
                )
            self._tasks.append(asyncio.create_task(self._report_loop(), name="supervisor-report"))
            self._tasks.append(asyncio.create_task(self._health_loop(), name="supervisor-health"))
        await self._stop.wait()

    async def _shutdown(self) -> None:
        self.stopping = True
        sd_notify("STOPPING=1\nSTATUS=stopping the role processes")
        log.info("supervisor stopping children=%d", len(self.children))
        gw = self.config.gateway
        await stop_in_order(
            self.children,
            workers_limit=self.config.agent.shutdown_grace + gw.child_stop_timeout,
            channels_limit=gw.child_stop_timeout,
            changed=self._publish,
        )
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for child in self.children:
            child.state = "stopped"
        await self._publish()
        self._close_notify()
        self._close_pipe()
        log.info("supervisor stopped")

    def _close_pipe(self) -> None:
        if self.zygote is not None:
            self.zygote.close()
        for fd in (self._parent_r, self.parent_w):
            with contextlib.suppress(OSError):
                os.close(fd)

    async def _migrate(self) -> None:
        """Bring the store to the newest migration in a process forked for that alone, so
        no role keeps alembic (`gateway.store_migration`). Without the zygote, or when
        that process fails, the channels role migrates as it opens the store (and says
        why it cannot)."""
        try:
            pid = await self._fork(["--home", str(self.home), "--migrate"], self._child_env())
        except OSError as exc:
            log.warning("cannot fork the store's migration: %s", exc)
            return
        if pid is None:
            return
        proc = self.reaper.watch(pid)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(_READY_TIMEOUT):
                await first_of(proc.wait(), self._stop.wait())
        if proc.returncode is None:  # stopping, or it hangs
            log.warning("stopping the store's migration pid=%d", pid)
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
            try:
                async with asyncio.timeout(self.config.gateway.child_stop_timeout):
                    await proc.wait()
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                await proc.wait()
        elif (fatal := migration_exit(pid, proc.returncode)) is not None:
            self.exit_code = fatal
            self._stop.set()

    async def _fork(self, argv: list[str], env: dict[str, str]) -> int | None:
        """The pid of ``gateway.daemon`` with ``argv`` forked by the zygote; None without
        a zygote (it died: from now on, children are new interpreters)."""
        if self.zygote is None:
            return None
        try:
            return await self.zygote.spawn(argv, env)
        except ZygoteGone as exc:
            log.warning("%s: starting roles as new interpreters from now on", exc)
            self.zygote.close()
            self.zygote = None
            return None

    # -- one child -------------------------------------------------------------------------

    async def _keep(self, child: RoleChild) -> None:
        """Run ``child``; restart it whenever it dies, with backoff, until stopping."""
        gw = self.config.gateway
        while not self.stopping:
            try:
                await self._spawn(child)
            except OSError as exc:
                log.error("cannot start role=%s: %s", child.name, exc)
                code: int | None = None
                child.error = f"cannot start: {exc}"
            else:
                assert child.proc is not None
                code = await child.proc.wait()
                self._on_notify()  # what it said just before it exited
                child.error = describe_exit(code)
            if self.stopping or self._stop.is_set():  # another role stopped it
                return
            ran = time.monotonic() - child.started_mono
            fatal = fatal_exit(child.name, code, child.ready, child.restarts, child.lost)
            if fatal is not None:
                self.exit_code = fatal
                self._stop.set()
                return
            child.ready = False
            plan = plan_restart(child.quick_deaths, ran, gw)
            child.quick_deaths, delay, looping = plan.quick_deaths, plan.delay, plan.looping
            child.state = plan.state
            (log.error if looping else log.warning)(
                "role=%s pid=%s %s after %.1fs; restart in %.1fs (quick deaths in a row: %d)%s",
                child.name,
                child.proc.pid if child.proc is not None else "-",
                child.error,
                ran,
                delay,
                child.quick_deaths,
                " CRASH LOOP" if looping else "",
            )
            await self._publish()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(delay):
                    await self._stop.wait()
            child.restarts += 1

    async def _spawn(self, child: RoleChild) -> None:
        if child.state != "crash-loop":
            child.state = "starting"
        child.ready = False
        child.became_ready.clear()
        argv = ["--home", str(self.home), "--role", child.role]
        argv += ["--channel", child.channel] if child.channel is not None else []
        env = self._child_env()
        pid = await self._fork(argv, env)
        if pid is None:
            pid = os.posix_spawn(  # noqa: ASYNC221 - returns once the child exists
                self.python,
                [self.python, "-m", "gateway.daemon", *argv],
                env,
                file_actions=[(os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0)],
                setsid=True,  # a terminal's Ctrl-C reaches the supervisor only
            )
        child.proc = self.reaper.watch(pid)
        child.started_at = time.time()
        child.started_mono = child.last_ping = time.monotonic()
        log.info("started role=%s pid=%d", child.name, child.proc.pid)
        await self._publish()

    def _child_env(self) -> dict[str, str]:
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "LISTEN_FDS")
        }
        env["NOTIFY_SOCKET"] = self._notify_name
        env["WATCHDOG_USEC"] = str(int(CHILD_WATCHDOG_SECONDS * 1_000_000))
        env[SUPERVISED_ENV] = str(os.getpid())
        env[PARENT_FD_ENV] = str(self._parent_r)
        return env

    # -- what the children say ---------------------------------------------------------------

    def _open_notify(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        sock.setblocking(False)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        sock.bind("\0" + self._notify_name[1:])
        self._notify = sock
        asyncio.get_running_loop().add_reader(sock.fileno(), self._on_notify)

    def _close_notify(self) -> None:
        sock, self._notify = self._notify, None
        if sock is not None:
            asyncio.get_running_loop().remove_reader(sock.fileno())
            sock.close()

    def _on_notify(self) -> None:
        sock = self._notify
        while sock is not None:
            try:
                data, ancillary, _flags, _addr = sock.recvmsg(4096, socket.CMSG_SPACE(_CREDS.size))
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                log.warning("reading a child's notification failed: %s", exc)
                return
            pid = next(
                (
                    _CREDS.unpack(payload[: _CREDS.size])[0]
                    for level, kind, payload in ancillary
                    if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS
                ),
                None,
            )
            child = next((c for c in self.children if c.proc and c.proc.pid == pid), None)
            if child is not None:
                self._heard(child, data.decode(errors="replace"))

    def _heard(self, child: RoleChild, message: str) -> None:
        child.last_ping = time.monotonic()
        fields = dict(line.partition("=")[::2] for line in message.split("\n") if "=" in line)
        if fields.get("READY") == "1" and not child.ready:
            child.ready = True
            if not self.stopping:
                child.state = "running"
            child.became_ready.set()
            log.info("role=%s pid=%s ready", child.name, child.pid)
            self._changed.set()
        child.lost = fields.get(STORE_LOST_FIELD, child.lost)
        if fields.get("STOPPING") == "1" and not self.stopping:
            child.state = "stopping"
            self._changed.set()

    # -- reporting, health, systemd ------------------------------------------------------------

    def summary(self) -> str:
        """``channels running, scheduler running, agent 2/2 running (restarts 3)``."""
        agents = [c for c in self.children if c.role == "agent"]
        parts = [f"{c.name} {c.state}" for c in self.children if c.role != "agent"]
        up = sum(c.healthy for c in agents)
        bad = sorted({c.state for c in agents if not c.healthy})
        parts.append(f"agent {up}/{len(agents)} running" + (f" ({', '.join(bad)})" if bad else ""))
        restarts = sum(c.restarts for c in self.children)
        return "; ".join(parts) + (f"; restarts {restarts}" if restarts else "")

    async def _publish(self) -> None:
        """Write the process table (what ``familiar status`` shows) and tell systemd."""
        async with self._writing:  # one writer at a time: the table is replaced whole
            # Taken under the lock, so an older snapshot never overwrites a newer one, and
            # READY=1 is sent only once a table showing every child running is written.
            table = [c.info() for c in self.children]
            all_healthy = all(c.healthy for c in self.children)
            summary = self.summary()
            write = partial(write_processes, started_at=self.started_at, stopping=self.stopping)
            try:
                await asyncio.to_thread(write, self.run_dir, table)
            except OSError as exc:
                log.warning("cannot write the process table: %s", exc)
            if self.stopping:
                return
            if not self._announced_ready and all_healthy:
                self._announced_ready = True
                sd_notify(f"READY=1\nSTATUS={summary}")
                log.info("gateway ready: %s", summary)
            else:
                sd_notify(f"STATUS={summary}")

    async def _report_loop(self) -> None:
        while True:
            await self._changed.wait()
            self._changed.clear()
            await self._publish()

    async def _health_loop(self) -> None:
        """Kill children whose event loop hangs; ping systemd while all are healthy."""
        interval = watchdog_interval()
        tick = min(interval, 1.0) if interval is not None else 1.0
        last_ping = 0.0
        while True:
            await asyncio.sleep(tick)
            now = time.monotonic()
            for child in self.children:
                if child.healthy and child.pid is not None and now - child.last_ping > _HUNG_AFTER:
                    log.error("role=%s pid=%d stopped answering: killing it", child.name, child.pid)
                    child.state = "backoff"
                    with contextlib.suppress(ProcessLookupError):
                        child.proc.kill()  # type: ignore[union-attr]
            if (
                interval is not None
                and now - last_ping >= interval
                and all(c.healthy for c in self.children)
            ):
                sd_notify("WATCHDOG=1")
                last_ping = now
