"""The order the supervisor stops the role processes in (``gateway.processes = "multi"``).

Replies of the turns that finish during ``agent.shutdown_grace`` must still reach the
people waiting for them (``familiar send``, a webhook ``wait``, Slack, Teams), so the
channels stop last:

1. the front (the ``channels`` process) gets `DRAIN_SIGNAL`: it stops taking messages
   in (control socket, HTTP port, channel restarts) and goes on delivering, as do the
   processes of single channels (``per-channel``);
2. the agent workers and the scheduler get SIGTERM: running turns finish within the
   grace, what cannot is released (it stays queued); those still running after
   ``agent.shutdown_grace + gateway.child_stop_timeout`` are killed;
3. then every channels process gets SIGTERM, delivers what was settled, and stops
   (killed after ``gateway.child_stop_timeout``).

A front that never reported ready gets SIGTERM at once: it has nothing to deliver, and
may not handle `DRAIN_SIGNAL` yet.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol

from gateway.process_table import ProcessState
from gateway.reaper import ChildProcess

__all__ = ["DRAIN_SIGNAL", "StoppingChild", "stop_in_order"]

log = logging.getLogger(__name__)

DRAIN_SIGNAL = signal.SIGUSR1
"""Supervisor -> front: stop taking messages in, keep delivering until SIGTERM."""


class StoppingChild(Protocol):
    """What stopping needs of a supervised child."""

    role: str
    name: str
    channel: str | None
    ready: bool
    state: ProcessState
    proc: ChildProcess | None


async def stop_in_order(
    children: Sequence[StoppingChild],
    *,
    workers_limit: float,
    channels_limit: float,
    changed: Callable[[], Awaitable[None]],
) -> None:
    """Stop ``children`` in the order above; ``changed`` publishes their states."""
    channels = [c for c in children if c.role == "channels"]
    others = [c for c in children if c.role != "channels"]
    for child in children:
        if not _running(child):
            continue
        child.state = "stopping"
        if child.role != "channels" or not child.ready:
            _signal(child, signal.SIGTERM)
        elif child.channel is None:
            _signal(child, DRAIN_SIGNAL)
        # A channel in a process of its own takes nothing in but through the front
        # (or its platform's socket, as in one process): it goes on delivering.
    await changed()
    await _wait_or_kill(others, workers_limit)
    for child in channels:
        if _running(child):
            _signal(child, signal.SIGTERM)
    await _wait_or_kill(channels, channels_limit)


def _running(child: StoppingChild) -> bool:
    return child.proc is not None and child.proc.returncode is None


def _signal(child: StoppingChild, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        child.proc.send_signal(sig)  # type: ignore[union-attr]


async def _wait_or_kill(children: Sequence[StoppingChild], limit: float) -> None:
    procs = [c.proc for c in children if c.proc is not None and c.proc.returncode is None]
    if not procs:
        return
    waits = [asyncio.ensure_future(p.wait()) for p in procs]
    _, late = await asyncio.wait(waits, timeout=limit)
    if not late:
        return
    for proc in procs:
        if proc.returncode is None:
            log.warning("child did not stop in %.0fs: killing pid=%d", limit, proc.pid)
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
    await asyncio.wait(late, timeout=10)
