"""systemd readiness and watchdog notifications (sd_notify without third-party code)."""

from __future__ import annotations

import asyncio
import logging
import os
import socket

__all__ = ["sd_notify", "watchdog_interval", "watchdog_loop"]

logger = logging.getLogger(__name__)


def sd_notify(state: str) -> bool:
    """Send a state string such as ``READY=1`` to the service manager.

    Reads ``$NOTIFY_SOCKET`` (a filesystem path, or ``@name`` for an abstract socket).
    The datagram is sent non-blocking, so a stalled manager can never stall the event
    loop: a full queue is reported like any other error.

    Args:
        state: newline-separated ``KEY=VALUE`` assignments, e.g. ``"READY=1\\nSTATUS=up"``.

    Returns:
        True if the datagram was sent; False when not running under systemd (no
        ``$NOTIFY_SOCKET``) or when sending failed (logged as a warning).
    """
    addr = os.environ.get("NOTIFY_SOCKET")
    if not addr:
        return False
    if addr[0] == "@":
        addr = "\0" + addr[1:]
    elif addr[0] != "/":
        # systemd >= 254 may also hand out vsock: addresses; we only speak AF_UNIX.
        logger.warning("sd_notify: unsupported NOTIFY_SOCKET address %r", addr)
        return False
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            sock.setblocking(False)
            sock.connect(addr)
            sock.sendall(state.encode())
    except OSError as exc:
        logger.warning("sd_notify(%r) to %r failed: %s", state, addr.replace("\0", "@"), exc)
        return False
    return True


def watchdog_interval() -> float | None:
    """Return how often to send ``WATCHDOG=1``, in seconds, or None if not asked to.

    That is half of ``$WATCHDOG_USEC`` (systemd's ``WatchdogSec=``), and only when
    ``$WATCHDOG_PID`` is unset or names this process.
    """
    usec, pid = os.environ.get("WATCHDOG_USEC"), os.environ.get("WATCHDOG_PID")
    if not usec:
        return None
    try:
        usec_value = int(usec)
        pid_value = int(pid) if pid else None
    except ValueError:
        logger.warning("ignoring malformed WATCHDOG_USEC=%r / WATCHDOG_PID=%r", usec, pid)
        return None
    if pid_value is not None and pid_value != os.getpid():
        return None
    if usec_value <= 0:
        logger.warning("ignoring non-positive WATCHDOG_USEC=%r", usec)
        return None
    return usec_value / 2_000_000


async def watchdog_loop(interval: float, stop: asyncio.Event) -> None:
    """Send ``WATCHDOG=1`` now and then every ``interval`` seconds until ``stop`` is set.

    The pings come from the event loop itself, so a blocked loop stops them and
    systemd restarts the service, which is the point.

    Args:
        interval: seconds between pings (see `watchdog_interval`); must be positive.
        stop: set it to end the loop.
    """
    if interval <= 0:
        raise ValueError(f"watchdog interval must be positive, got {interval!r}")
    while not stop.is_set():
        sd_notify("WATCHDOG=1")
        try:
            async with asyncio.timeout(interval):
                await stop.wait()
        except TimeoutError:
            pass
