"""Lease owner ids that let a restarted gateway tell a dead lease holder from a live one."""

from __future__ import annotations

import os
import socket
import uuid

__all__ = ["make_owner", "owner_is_dead"]


def _start_time(pid: int) -> str | None:
    """The process start time in clock ticks since boot (Linux), or None elsewhere."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode(errors="replace")
    except OSError:
        return None
    # Field 22; the command name (field 2) may contain spaces, so split after its ')'.
    return stat.rsplit(")", 1)[1].split()[19]


def make_owner() -> str:
    """``host/pid/start`` for this process (start = process start time, else a nonce)."""
    pid = os.getpid()
    return f"{socket.gethostname()}/{pid}/{_start_time(pid) or uuid.uuid4().hex[:12]}"


def owner_is_dead(owner: str) -> bool:
    """True when ``owner`` was a process on this host that no longer runs.

    Owners on other hosts are never judged dead here: their leases simply expire.
    """
    try:
        host, pid_text, start = owner.split("/", 2)
        pid = int(pid_text)
    except ValueError:
        return False
    if host != socket.gethostname():
        return False
    if owner == make_owner():
        return False
    current = _start_time(pid)
    if current is not None:
        return current != start
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return pid == os.getpid()  # our pid, but not our owner id: an earlier incarnation
