"""The mount namespace systemd 252 sets up for a unit's sandboxing directives.

Only what changes the view of the file system is modelled: ``ProtectSystem=`` (every
mount but /dev, /proc and /sys read-only), ``ReadWritePaths=``, ``ReadOnlyPaths=``,
``ProtectHome=``, ``TemporaryFileSystem=``, ``BindPaths=``, ``BindReadOnlyPaths=`` (their
sources taken from the host's view before anything is mounted over them, as systemd
does), ``InaccessiblePaths=``, ``PrivateTmp=``, ``PrivateDevices=`` (a fresh /dev with the pseudo
devices, /dev/pts and /dev/shm), ``ProtectProc=``/``ProcSubset=`` (a new procfs with
``hidepid=``/``subset=``), ``ProtectKernelTunables=`` (/proc/sys and friends read-only,
/proc/kallsyms and /proc/kcore inaccessible), ``ProtectKernelLogs=`` (/proc/kmsg and
/dev/kmsg inaccessible), ``ProtectKernelModules=`` and ``ProtectControlGroups=``.
The masks over /proc matter most: the kernel refuses a new procfs to an unprivileged
user namespace while a locked mount hides part of the existing one.
"""

from __future__ import annotations

import ctypes
import os
import sys
from pathlib import Path

from tests.unitsim.unitfile import Directives, boolean, last, words

__all__ = ["apply_mounts", "inaccessible_nodes", "mount", "stash_dir"]

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MS_STRICTATIME = 1 << 24

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mount.argtypes = [ctypes.c_char_p] * 3 + [ctypes.c_ulong, ctypes.c_char_p]

_TUNABLES_RO = (
    "/proc/acpi", "/proc/apm", "/proc/asound", "/proc/bus", "/proc/fs", "/proc/irq",
    "/proc/latency_stats", "/proc/mtrr", "/proc/scsi", "/proc/sys", "/proc/sysrq-trigger",
    "/proc/timer_stats", "/sys", "/sys/fs/bpf", "/sys/fs/cgroup/cgroup.sane_behavior",
    "/sys/kernel/debug", "/sys/kernel/tracing",
)  # fmt: skip
_TUNABLES_HIDDEN = ("/proc/kallsyms", "/proc/kcore")
_PRIVATE_TMP = (Path("/tmp"), Path("/var/tmp"))
_DEVICES = ("null", "zero", "full", "random", "urandom", "tty")


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str = "") -> None:
    def enc(value: str | None) -> bytes | None:
        return None if value is None else value.encode()

    if _libc.mount(enc(source), enc(target), enc(fstype), flags, enc(data) if data else None):
        code = ctypes.get_errno()
        raise OSError(code, f"mount {source} on {target}: {os.strerror(code)}")


_STASH = "/mnt"


def stash_dir(name: str) -> str:
    """A scratch directory on a private tmpfs over /mnt (never on the host's disk)."""
    if not os.path.ismount(_STASH) or not Path(_STASH, ".unitsim").exists():
        mount("tmpfs", _STASH, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755")
        Path(_STASH, ".unitsim").touch()
    path = Path(_STASH, name)
    path.mkdir(exist_ok=True)
    return str(path)


def _checkout_under_tmp() -> list[tuple[str, int]]:
    """The checkout running the simulation and its venv, when under /tmp or /var/tmp:
    (path, an ``O_PATH`` descriptor kept to reach it once ``PrivateTmp=`` hides it)."""
    roots = {Path(sys.prefix).resolve(), Path(__file__).resolve().parents[2]}
    hidden = [r for r in roots if any(t == r or t in r.parents for t in _PRIVATE_TMP)]
    outer = [r for r in hidden if not any(o in r.parents for o in hidden)]
    return [(str(r), os.open(r, os.O_PATH | os.O_DIRECTORY)) for r in sorted(outer)]


def _show_again(checkout: list[tuple[str, int]]) -> None:
    """Mount ``checkout`` read-only at its own path over the private /tmp: as if familiar
    were installed outside /tmp (what `familiar service install` demands), so the suite
    runs from a checkout anywhere. Only the simulation's own interpreter and code."""
    for path, fd in checkout:
        Path(path).mkdir(parents=True, exist_ok=True)
        mount(f"/proc/self/fd/{fd}", path, None, MS_BIND | MS_REC)
        mount(None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY)
        os.close(fd)


def _read_only(path: str) -> None:
    if not os.path.exists(path):
        return
    mount(path, path, None, MS_BIND | MS_REC)
    mount(None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY)


def _inaccessible(path: str, nodes: str) -> None:
    if not os.path.lexists(path):
        return
    source = os.path.join(nodes, "dir" if os.path.isdir(path) else "reg")
    mount(source, path, None, MS_BIND)


def _mountpoints() -> list[str]:
    points = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4].encode().decode("unicode_escape")
        points.append(point)
    return points


def _protect_system(mode: str) -> None:
    if mode != "strict":
        for path in ("/usr", "/boot", "/efi") + (("/etc",) if mode == "full" else ()):
            _read_only(path)
        return
    for point in _mountpoints():
        if point.startswith(("/proc", "/dev", "/sys", _STASH + "/")) or point == _STASH:
            continue
        try:
            mount(None, point, None, MS_REMOUNT | MS_BIND | MS_RDONLY)
        except OSError:
            continue  # gone under a later mount, or not remountable: as systemd, skip


def _private_dev(stash: str) -> None:
    host = os.path.join(stash, "hostdev")
    os.makedirs(host, exist_ok=True)
    mount("/dev", host, None, MS_BIND | MS_REC)
    mount("tmpfs", "/dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755")
    for name in _DEVICES:
        Path("/dev", name).touch()
        mount(os.path.join(host, name), os.path.join("/dev", name), None, MS_BIND)
    for name in ("pts", "shm"):
        os.mkdir(os.path.join("/dev", name))
        mount(os.path.join(host, name), os.path.join("/dev", name), None, MS_BIND | MS_REC)
    for link, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0")):
        os.symlink(target, os.path.join("/dev", link))
    os.symlink("/proc/self/fd/1", "/dev/stdout")
    os.symlink("/proc/self/fd/2", "/dev/stderr")


def _proc(directives: Directives) -> None:
    hidepid = last(directives, "ProtectProc", "default")
    subset = last(directives, "ProcSubset", "all")
    if hidepid == "default" and subset == "all":
        return
    options = [f"hidepid={hidepid}"] + (["subset=pid"] if subset == "pid" else [])
    mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, ",".join(options))


def inaccessible_nodes(stash: str) -> str:
    """An empty directory and file nobody may open, to mount over what is hidden."""
    os.makedirs(os.path.join(stash, "hostdev"), exist_ok=True)  # for PrivateDevices=
    nodes = os.path.join(stash, "inaccessible")
    os.makedirs(os.path.join(nodes, "dir"), mode=0, exist_ok=True)
    os.chmod(os.path.join(nodes, "dir"), 0)
    reg = os.path.join(nodes, "reg")
    Path(reg).touch()
    os.chmod(reg, 0)
    return nodes


def _protect_home(mode: str, nodes: str) -> None:
    for path in ("/home", "/root", "/run/user"):
        if not os.path.isdir(path):
            continue
        if mode == "yes":
            _inaccessible(path, nodes)
        elif mode == "read-only":
            _read_only(path)
        elif mode == "tmpfs":
            mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755")


def _kernel(directives: Directives, nodes: str) -> None:
    if boolean(directives, "ProtectKernelTunables"):
        for path in _TUNABLES_RO:
            _read_only(path)
        for path in _TUNABLES_HIDDEN:
            _inaccessible(path, nodes)
    if boolean(directives, "ProtectKernelLogs"):
        for path in ("/proc/kmsg", "/dev/kmsg"):
            _inaccessible(path, nodes)
    if boolean(directives, "ProtectKernelModules"):
        for path in ("/usr/lib/modules", "/lib/modules"):
            _inaccessible(path, nodes)
    if boolean(directives, "ProtectControlGroups"):
        _read_only("/sys/fs/cgroup")


def _paths(directives: Directives, key: str) -> list[str]:
    return [p.lstrip("-") for value in directives.get(key, []) for p in words(value)]


def _stash_binds(directives: Directives, stash: str) -> list[tuple[str, str, bool]]:
    """(stashed source, target, read-only) of each bind, taken before any mount hides
    its source (systemd resolves them in the host's view)."""
    binds = []
    for key, read_only in (("BindPaths", False), ("BindReadOnlyPaths", True)):
        for value in directives.get(key, []):
            for word in words(value):
                optional = word.startswith("-")
                source, _, target = word.lstrip("-").partition(":")
                if not os.path.exists(source):
                    if optional:
                        continue
                    raise OSError(f"{key}: {source} does not exist (226/NAMESPACE)")
                keep = os.path.join(stash, f"bind{len(binds)}")
                if os.path.isdir(source):
                    os.makedirs(keep, exist_ok=True)
                else:
                    Path(keep).touch()
                mount(source, keep, None, MS_BIND | MS_REC)
                binds.append((keep, target or source, read_only))
    return binds


def _temporary_file_systems(directives: Directives) -> list[str]:
    """Mount each ``TemporaryFileSystem=``; the ones to make read-only once binds are in."""
    later = []
    for value in directives.get("TemporaryFileSystem", []):
        for word in words(value):
            path, _, options = word.partition(":")
            os.makedirs(path, exist_ok=True)  # systemd makes a missing mount point too
            mount("tmpfs", path, "tmpfs", MS_NODEV | MS_STRICTATIME, "mode=0755")
            if "ro" in options.split(","):
                later.append(path)
    return later


def apply_mounts(directives: Directives, *, stash: str, nodes: str) -> None:
    """Set up the unit's mounts in this (already private) mount namespace.

    ``nodes`` is what `inaccessible_nodes` made; ``stash`` a scratch directory.
    """
    binds = _stash_binds(directives, stash)
    _protect_system(last(directives, "ProtectSystem", "no"))
    for path in _paths(directives, "ReadWritePaths"):
        mount(path, path, None, MS_BIND | MS_REC)
        mount(None, path, None, MS_REMOUNT | MS_BIND)  # a bind copies the ro flag
    _protect_home(last(directives, "ProtectHome", "no"), nodes)
    read_only_tmpfs = _temporary_file_systems(directives)
    for source, target, read_only in binds:
        if os.path.isdir(source):
            os.makedirs(target, exist_ok=True)
        else:
            Path(target).touch()
        mount(source, target, None, MS_BIND | MS_REC)
        if read_only:
            mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY)
    if last(directives, "ProtectHome", "no") == "tmpfs":  # read-only, as systemd mounts it
        read_only_tmpfs += [p for p in ("/home", "/root", "/run/user") if os.path.ismount(p)]
    for path in read_only_tmpfs:
        mount(None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NODEV)
    if boolean(directives, "PrivateTmp"):
        checkout = _checkout_under_tmp()
        for path in ("/tmp", "/var/tmp"):
            mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777")
        _show_again(checkout)
    if boolean(directives, "PrivateDevices"):
        _private_dev(stash)
    _proc(directives)
    _kernel(directives, nodes)
    for path in _paths(directives, "ReadOnlyPaths"):
        _read_only(path)
    for path in _paths(directives, "InaccessiblePaths"):
        _inaccessible(path, nodes)
