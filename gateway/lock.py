"""An exclusive ``flock`` on a file in the home's run directory, holding our pid."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from core.errors import FamiliarError

__all__ = ["CHANNELS_LOCK_FILE", "LOCK_FILE", "GatewayLocked", "HomeLock"]

LOCK_FILE = "gateway.lock"
"""Held by the one gateway of a home: the supervisor, or the single process."""
CHANNELS_LOCK_FILE = "channels.lock"
"""Held by the one channels role of a home (it owns the control socket)."""


class GatewayLocked(FamiliarError):
    """Another gateway holds the lock of this home."""


class HomeLock:
    """An exclusive ``flock`` on ``<home>/run/gateway.lock`` holding our pid."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def acquire(self, home: Path) -> None:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = os.read(fd, 32).decode(errors="replace").strip() or "?"
            os.close(fd)
            raise GatewayLocked(
                f"another familiar gateway (pid {pid}) is already running on {home}"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.ftruncate(self._fd, 0)
            os.close(self._fd)  # closing drops the flock
            self._fd = None
