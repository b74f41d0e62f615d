"""Why ``bwrap ... true`` failed, in words an operator can act on.

bubblewrap's own messages name the system call that failed, not the setting that made it
fail. Under systemd that setting is nearly always one of the unit's hardening directives,
so the explanation names them; the units familiar writes forbid what bubblewrap needs on
purpose and run commands in their exec unit instead (docs/security/sandbox.md).
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

__all__ = ["explain_probe_failure", "systemd_unit"]

_FIX_UNIT = (
    "under the units `familiar service install` writes, commands run in the exec unit "
    '(tools.exec.sandbox = "auto" or "systemd"), not in bubblewrap'
)

# (what bwrap prints, what blocks it under systemd, what blocks it elsewhere)
_CAUSES: tuple[tuple[tuple[str, ...], str, str], ...] = (
    (
        ("creating new namespace", "no permissions to create", "unshare"),
        "the unit forbids the namespaces bubblewrap creates (RestrictNamespaces= must "
        "allow user mnt pid ipc, and net for tools.exec.network = false)",
        "user namespaces are off (sysctl kernel.unprivileged_userns_clone or "
        "user.max_user_namespaces, an AppArmor userns restriction, or a container)",
    ),
    (
        ("can't mount proc",),
        "a mask over /proc makes the kernel refuse a fresh /proc (ProtectKernelTunables=, "
        "ProtectKernelLogs=, ProcSubset=pid or InaccessiblePaths= under /proc)",
        "/proc has masked paths (a container runtime masks /proc/kcore, /proc/sys...), "
        "so the kernel refuses a fresh /proc",
    ),
    (
        ("capset",),
        "the unit's SystemCallFilter= refuses capset (add `SystemCallFilter=@mount capset`)",
        "a system-call filter refuses capset",
    ),
    (
        ("netlink", "loopback", "rtm_newaddr"),
        "the unit's RestrictAddressFamilies= lacks AF_NETLINK, which bubblewrap needs to "
        "bring up the loopback of tools.exec.network = false",
        "netlink sockets are refused, which bubblewrap needs for tools.exec.network = false",
    ),
    (
        ("pivot_root", "mount", "remount"),
        "the unit's SystemCallFilter= refuses the mount calls (add `SystemCallFilter=@mount`)",
        "mounting inside a user namespace is refused (a seccomp filter or a security module)",
    ),
)


def systemd_unit() -> str | None:
    """The systemd unit this process runs in ("" when its name is not found), or None
    outside systemd (which sets ``INVOCATION_ID`` for every service it starts)."""
    if not os.environ.get("INVOCATION_ID"):
        return None
    try:
        text = Path("/proc/self/cgroup").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    for line in text.splitlines():
        for part in reversed(line.rpartition(":")[2].split("/")):
            if part.endswith(".service"):
                return part
    return ""


def explain_probe_failure(stderr: str, returncode: int, *, unit: str | None) -> str:
    """What most likely keeps bubblewrap from running, given how ``bwrap ... true`` failed.

    Args:
        stderr: what bwrap printed.
        returncode: its exit status (negative: the signal that killed it).
        unit: the systemd unit we run in (`systemd_unit`), None outside systemd.
    """
    under = unit is not None
    where = f"under systemd unit {unit}: " if unit else "under systemd: " if under else ""
    if returncode == -signal.SIGSYS:
        if under:
            return (
                f"{where}its SystemCallFilter= killed bwrap (a system call it needs is not "
                f"allowed); {_FIX_UNIT}"
            )
        return "a system-call filter killed bwrap (SIGSYS)"
    text = stderr.lower()
    for needles, under_systemd, elsewhere in _CAUSES:
        if any(n in text for n in needles):
            return f"{where}{under_systemd}; {_FIX_UNIT}" if under else elsewhere
    if under:
        return f"{where}one of its sandboxing directives blocks bubblewrap; {_FIX_UNIT}"
    return "see bubblewrap's message"
