"""Run a command the way systemd 252 would start it under a unit, without systemd.

``python -m tests.unitsim.run --unit FILE --kind system|user --user NAME -- ARGV...``,
as root. For a system unit: a private mount namespace with the unit's mounts, the
capability bounding set emptied, ``PrivateUsers=`` (a user namespace mapping root and the
user, set up after the mounts as the system manager does), then the user's ids. For a
user unit (what a user manager does, unprivileged): the user's ids first, then a user
namespace and the mounts inside it. Then ``UMask=``, no_new_privs and every seccomp
filter of the unit, and ``execv``. A directive the model does not know stops it (exit
2): the simulation refuses to claim a unit it cannot reproduce.
"""

from __future__ import annotations

import argparse
import ctypes
import fcntl
import grp
import os
import pwd
import socket
import struct
import sys
from pathlib import Path

from tests.unitsim.filters import build_filters, load_filters
from tests.unitsim.mounts import (
    MS_BIND,
    MS_PRIVATE,
    MS_REC,
    apply_mounts,
    inaccessible_nodes,
    mount,
    stash_dir,
)
from tests.unitsim.unitfile import Directives, boolean, last, parse_service, words

MODELLED = {
    "NoNewPrivileges", "ProtectSystem", "ProtectHome", "ReadWritePaths", "ReadOnlyPaths",
    "PrivateTmp", "PrivateDevices", "ProtectKernelTunables", "ProtectKernelModules",
    "ProtectKernelLogs", "ProtectControlGroups", "ProtectClock", "ProtectHostname",
    "RestrictNamespaces", "RestrictRealtime", "RestrictSUIDSGID", "LockPersonality",
    "MemoryDenyWriteExecute", "RestrictAddressFamilies", "SystemCallArchitectures",
    "SystemCallFilter", "CapabilityBoundingSet", "UMask", "ProtectProc", "ProcSubset",
    "PrivateUsers", "User", "Group", "TemporaryFileSystem", "BindPaths", "BindReadOnlyPaths",
    "InaccessiblePaths", "PrivateNetwork", "PrivateIPC", "SystemCallErrorNumber", "Environment",
}  # fmt: skip
"""Directives applied here."""
BY_SOCKET = {"KillMode", "KillSignal"}
"""Applied by `tests.unitsim.socket` (the instance's cgroup is killed when it ends)."""
ONLY_TAKE_AWAY = {
    "IPAddressDeny", "TasksMax", "MemoryMax", "CPUWeight", "IOWeight", "LimitCORE",
    "RuntimeMaxSec",
}  # fmt: skip
"""Limits and filters not reproduced: each only refuses more under the real unit, so
what a command could not do here it cannot do there either."""
NO_BEARING = {
    "Type", "NotifyAccess", "ExecStart", "Environment", "EnvironmentFile", "Restart",
    "RestartSec", "RestartPreventExitStatus", "TimeoutStopSec", "WatchdogSec",
    "StateDirectory", "StateDirectoryMode", "KeyringMode", "RemoveIPC", "PrivateMounts",
}  # fmt: skip
"""Directives that change nothing a command or bwrap can observe while it runs
(start-up, restarts, clean-up at stop, keyrings, mount propagation to the host)."""

CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWUSER = 0x00020000, 0x04000000, 0x10000000
CLONE_NEWIPC, CLONE_NEWNET = 0x08000000, 0x40000000
_SIOCGIFFLAGS, _SIOCSIFFLAGS, _IFF_UP = 0x8913, 0x8914, 0x1
PR_SET_DUMPABLE, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS = 4, 24, 38
_libc = ctypes.CDLL(None, use_errno=True)


def _call(result: int, what: str) -> None:
    if result != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"{what}: {os.strerror(code)}")


def _unshare(flags: int) -> None:
    _call(_libc.unshare(flags), f"unshare({flags:#x})")


def _write(path: str, text: str) -> None:
    with open(path, "w", encoding="ascii") as f:
        f.write(text)


def _private_users(uid: int, gid: int) -> None:
    """Move into a new user namespace mapping root and the user to themselves.

    Only a process outside the namespace may write such a map, so a child goes on
    (inside) while this process writes its maps, then waits and exits with its status.
    """
    ready_r, ready_w = os.pipe()
    go_r, go_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        _unshare(CLONE_NEWUSER)
        os.write(ready_w, b"1")
        if os.read(go_r, 1) != b"1":
            os._exit(3)
        return
    os.read(ready_r, 1)
    _write(f"/proc/{pid}/uid_map", f"0 0 1\n{uid} {uid} 1\n")
    _write(f"/proc/{pid}/gid_map", f"0 0 1\n{gid} {gid} 1\n")
    os.write(go_w, b"1")
    _, status = os.waitpid(pid, 0)
    os._exit(os.waitstatus_to_exitcode(status))


def _own_user_namespace(uid: int, gid: int) -> None:
    """What an unprivileged user manager does: a user namespace mapping only itself."""
    _libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)  # setuid() made /proc/self root's
    _unshare(CLONE_NEWUSER | CLONE_NEWNS)
    _write("/proc/self/setgroups", "deny")
    _write("/proc/self/uid_map", f"{uid} {uid} 1\n")
    _write("/proc/self/gid_map", f"{gid} {gid} 1\n")


def _reachable(path: Path, uid: int) -> None:
    """Let the service user reach ``path`` when a parent only root may enter (the test
    machine's interpreter under /root): what `familiar service install` demands of a
    real install, done in this mount namespace only."""
    for parent in reversed(path.parents):
        st = parent.stat()
        if st.st_uid == uid or st.st_mode & 0o001:
            continue
        child = path.relative_to(parent).parts[0]
        keep = stash_dir("reach")
        mount(str(parent / child), keep, None, MS_BIND | MS_REC)
        mount("tmpfs", str(parent), "tmpfs", 0, "mode=0755")
        (parent / child).mkdir()
        mount(keep, str(parent / child), None, MS_BIND | MS_REC)
        return


def _private_network() -> None:
    """A network namespace with only a loopback, brought up (PrivateNetwork=yes)."""
    _unshare(CLONE_NEWNET)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack("16sH14x", b"lo", 0)
        flags = struct.unpack("16sH14x", fcntl.ioctl(sock, _SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(sock, _SIOCSIFFLAGS, struct.pack("16sH14x", b"lo", flags | _IFF_UP))


def _namespaces(directives: Directives) -> None:
    if boolean(directives, "ProtectHostname"):
        _unshare(CLONE_NEWUTS)
    if boolean(directives, "PrivateIPC"):
        _unshare(CLONE_NEWIPC)
    if boolean(directives, "PrivateNetwork"):
        _private_network()


def _environment(directives: Directives) -> dict[str, str]:
    env = dict(os.environ)
    for value in directives.get("Environment", []):
        for word in words(value):
            name, _, setting = word.partition("=")
            env[name] = setting
    return env


def _drop_bounding_set() -> None:
    for cap in range(64):
        if _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            break  # past the last capability this kernel knows


def _check_known(directives: Directives) -> None:
    unknown = set(directives) - MODELLED - NO_BEARING - BY_SOCKET - ONLY_TAKE_AWAY
    if unknown:
        sys.exit(f"unitsim: directives not modelled: {', '.join(sorted(unknown))}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--unit", type=Path, required=True)
    parser.add_argument("--kind", choices=("system", "user"), required=True)
    parser.add_argument("--user", required=True)
    parser.add_argument("--reach", type=Path, action="append", default=[])
    parser.add_argument(
        "--listen-fd", action="store_true", help="fd 3 is a socket-activation connection"
    )
    parser.add_argument("argv", nargs="+")
    args = parser.parse_args()
    directives = parse_service(args.unit)
    _check_known(directives)
    account = pwd.getpwnam(args.user)
    uid, gid = account.pw_uid, account.pw_gid
    if group := last(directives, "Group"):
        gid = grp.getgrnam(group).gr_gid
    groups = os.getgrouplist(account.pw_name, gid)  # as systemd: the user's, in Group=
    filters = build_filters(directives)  # before any mount: runs systemd-analyze

    _unshare(CLONE_NEWNS)
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    stash = stash_dir("unit")
    nodes = inaccessible_nodes(stash)
    for path in args.reach:
        _reachable(path, uid)
    if args.kind == "system":
        apply_mounts(directives, stash=stash, nodes=nodes)
        _namespaces(directives)
        if last(directives, "CapabilityBoundingSet", None) == "":
            _drop_bounding_set()
        os.setgroups(groups)
        if boolean(directives, "PrivateUsers"):
            _private_users(uid, gid)
        os.setgid(gid)
        os.setuid(uid)
    else:
        os.chown(stash, uid, gid)  # the user manager's own scratch space
        os.setgroups([])
        os.setgid(gid)
        os.setuid(uid)
        _own_user_namespace(uid, gid)
        apply_mounts(directives, stash=stash, nodes=nodes)
        _namespaces(directives)
        _drop_bounding_set()  # the user manager's children hold no capabilities
    os.umask(int(last(directives, "UMask", "0022"), 8))
    os.chdir("/")
    _call(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    env = _environment(directives)
    if args.listen_fd:  # sd_listen_fds() checks that the fds are meant for this process
        env |= {"LISTEN_FDS": "1", "LISTEN_PID": str(os.getpid()), "LISTEN_FDNAMES": "connection"}
    load_filters(filters)
    os.execve(args.argv[0], args.argv, env)


if __name__ == "__main__":
    main()
