"""Channels in child processes of the main process (``gateway.processes = "main"``).

The main process runs the agent, the scheduler and the front; each channel that runs
in a process of its own (`isolated_channels`) is one `ChannelProcess`: ``python -m
gateway.daemon --role channels --channel NAME``, started with asyncio's subprocess
support (which also reaps it), in a session of its own so that a terminal's Ctrl-C
reaches the main process only, which stops it last. A child that dies is started
again: at once after a long run, else after a backoff that doubles from 0.5 s up to
``gateway.restart_backoff_max``; ``crash_loop_restarts`` quick deaths in a row are
reported ``crash-loop`` and it keeps being retried. A child that answered on its
socket and then stays silent for `HUNG_AFTER` seconds (a stuck event loop) is killed
and started again. Whatever the child does, the agent in the main process goes on.
A child that refuses its configuration (exit 78) before it was ever ready stops the
gateway with 78: restarting cannot fix a config file. A child watches a pipe the main
process holds open, and stops when it reads EOF.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path

from gateway.channel_proxy import RemoteChannel
from gateway.child_exits import describe_exit, plan_restart
from gateway.config import FamiliarConfig
from gateway.plugins import BUILT_IN_CHANNELS
from gateway.process_table import EX_CONFIG, PARENT_FD_ENV, ProcessInfo, ProcessState, process_name

__all__ = ["IN_PROCESS_CHANNELS", "ChannelProcess", "isolated_channels"]

log = logging.getLogger(__name__)

IN_PROCESS_CHANNELS = frozenset({"cli", "ui", "webhook"})
"""Channels of our own code on the gateway's own HTTP server and control socket: they
run in the main process (a channel that raises is restarted there by its
`ChannelSupervisor`); every other channel brings a platform SDK and runs in a child."""
HUNG_AFTER = 30.0
"""A child that answered once and then stays silent this long has a stuck event loop
(its socket is asked every half second): it is killed and started again."""
_SYSTEMD_ENV = ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "LISTEN_FDS", "LISTEN_PID")


def isolated_channels(config: FamiliarConfig, *, main: bool) -> tuple[str, ...]:
    """The enabled channels the front does not run itself, but in processes of their own.

    ``main``: the front is the main process of ``processes = "main"`` (else the
    ``channels`` role of ``multi``). ``channel_processes = "per-channel"`` isolates
    every channel but ``cli`` and ``ui``; ``main`` alone, every channel with an SDK of its own.
    """
    enabled = [name for name in config.channels.enabled() if name not in BUILT_IN_CHANNELS]
    if config.gateway.per_channel:
        return tuple(enabled)
    return tuple(n for n in enabled if n not in IN_PROCESS_CHANNELS) if main else ()


class ChannelProcess:
    """One channel's child process: started, restarted when it dies, stopped last.

    Args:
        home: the familiar home.
        name: the channel.
        config: the gateway's configuration (``gateway``: backoff, stop timeout).
        remote: the front's view of the channel (whether it answers on its socket).
        on_fatal: called with the gateway's exit status when the child's exit must
            stop the gateway.
        python: the interpreter the child runs under.
    """

    def __init__(
        self,
        home: Path,
        name: str,
        config: FamiliarConfig,
        *,
        remote: RemoteChannel,
        on_fatal: Callable[[int], None],
        python: str = sys.executable,
    ) -> None:
        self.name = process_name(name)
        self.channel = name
        self._home = home
        self._gateway = config.gateway
        self._remote = remote
        self._on_fatal = on_fatal
        self._python = python
        self._proc: asyncio.subprocess.Process | None = None
        self._task: asyncio.Task[None] | None = None
        self._stopping = asyncio.Event()
        self._final = False
        """The gateway is stopping: a child that exits now is not started again."""
        self.state: ProcessState = "starting"
        self.restarts = 0
        self.quick_deaths = 0
        self.started_at: float | None = None
        self.error: str | None = None

    @property
    def pid(self) -> int | None:
        proc = self._proc
        return proc.pid if proc is not None and proc.returncode is None else None

    async def start(self) -> None:
        self._task = asyncio.create_task(self._keep(), name=f"keep-{self.name}")

    def stop_restarting(self) -> None:
        """From now on a child that exits stays down (the gateway is stopping; under
        systemd the whole unit got SIGTERM, this child too)."""
        self._final = True

    async def stop(self) -> None:
        """SIGTERM (the channel delivers what was settled, then exits); SIGKILL after
        ``gateway.child_stop_timeout``."""
        self._stopping.set()
        proc = self._proc
        if proc is not None and proc.returncode is None:
            self.state = "stopping"
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
            try:
                async with asyncio.timeout(self._gateway.child_stop_timeout):
                    await proc.wait()
            except TimeoutError:
                log.warning("%s did not stop in time: killing it", self.name)
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                await proc.wait()
        if self._task is not None:
            await self._task
        self.state = "stopped"

    def report(self) -> ProcessInfo:
        """Its row in ``familiar status``: ``running`` once the channel answers."""
        state = self.state
        if state == "starting" and self.pid is not None and self._remote.running:
            state = self.state = "running"
        return ProcessInfo(
            role="channels",
            name=self.name,
            pid=self.pid,
            state=state,
            restarts=self.restarts,
            started_at=self.started_at,
            error=self.error,
        )

    async def _keep(self) -> None:
        while not self._stopping.is_set():
            started = time.monotonic()
            try:
                code: int | None = await self._run_once()
            except OSError as exc:
                log.error("cannot start %s: %s", self.name, exc)
                code, self.error = None, f"cannot start: {exc}"
            else:
                assert code is not None
                self.error = describe_exit(code)
            if self._stopping.is_set() or self._final:
                self.state = "stopped"
                return
            if code == EX_CONFIG and not self._remote.seen and self.restarts == 0:
                log.error("%s refused the configuration: stopping", self.name)
                self._on_fatal(EX_CONFIG)
                return
            await self._back_off(time.monotonic() - started)
            self.restarts += 1

    async def _run_once(self) -> int:
        read_end, write_end = os.pipe()
        try:
            env = {k: v for k, v in os.environ.items() if k not in _SYSTEMD_ENV}
            self._proc = await asyncio.create_subprocess_exec(
                self._python, "-m", "gateway.daemon", "--home", str(self._home),
                "--role", "channels", "--channel", self.channel,
                env={**env, PARENT_FD_ENV: str(read_end)}, pass_fds=(read_end,),
                stdin=asyncio.subprocess.DEVNULL, start_new_session=True,
            )  # fmt: skip
        except BaseException:
            os.close(write_end)
            raise
        finally:
            os.close(read_end)
        try:
            self.state = "starting"
            self.started_at = time.time()
            log.info("started %s pid=%d", self.name, self._proc.pid)
            if self._stopping.is_set():  # stop() came while it was being started
                self._proc.send_signal(signal.SIGTERM)
            watch = asyncio.create_task(self._watch(self._proc, time.monotonic()))
            try:
                return await self._proc.wait()
            finally:
                watch.cancel()
        finally:
            os.close(write_end)  # (the child is gone: nothing reads it)

    async def _watch(self, proc: asyncio.subprocess.Process, since: float) -> None:
        """Kill the child once it answered in this run and then went silent."""
        while True:
            await asyncio.sleep(1.0)
            answered = self._remote.answered_at
            if answered is None or answered < since or self._stopping.is_set():
                continue
            if time.monotonic() - answered > HUNG_AFTER:
                log.error("%s pid=%d stopped answering: killing it", self.name, proc.pid)
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                return

    async def _back_off(self, ran: float) -> None:
        plan = plan_restart(self.quick_deaths, ran, self._gateway)
        self.quick_deaths, delay, looping = plan.quick_deaths, plan.delay, plan.looping
        self.state = plan.state
        (log.error if looping else log.warning)(
            "%s %s after %.1fs; restart in %.1fs (quick deaths in a row: %d)%s",
            self.name,
            self.error,
            ran,
            delay,
            self.quick_deaths,
            " CRASH LOOP" if looping else "",
        )
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(delay):
                await self._stopping.wait()
