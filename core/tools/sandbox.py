"""Where ``exec`` commands run: a bubblewrap sandbox, the systemd exec unit (under the
units ``familiar service install`` writes), or (where neither works) the bare host.

Both kinds give the command an environment built from an allow-list, never the
daemon's own. The bubblewrap sandbox also hides everything but the system directories
and the workspace, gives the command a private ``/tmp``, ``/dev`` and ``/proc`` in new
PID (and user, IPC, optionally network) namespaces, and ties every
process of the command to the ``bwrap`` process we start, so killing that one process
kills them all.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import signal
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

from core.errors import ToolFailed

from .config import ExecConfig
from .control_files import sandbox_control_mounts
from .sandbox_diagnosis import explain_probe_failure, systemd_unit

__all__ = [
    "BASE_ENV",
    "EXEC_SOCKET_ENV",
    "NAMESPACES",
    "SYSTEM_PATHS",
    "BwrapSandbox",
    "NoSandbox",
    "Sandbox",
    "SandboxChoice",
    "SandboxSelector",
    "SystemdSandbox",
    "choose_sandbox",
    "command_env",
    "socket_from_env",
]

logger = logging.getLogger(__name__)

BASE_ENV = ("PATH", "LANG", "TERM")
"""Variables passed from the daemon to every command (plus ``HOME`` = the workspace)."""
_DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin"

SYSTEM_PATHS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
"""Host paths the bubblewrap sandbox shows read-only (those that exist; symlinks kept)."""
_MASKED = ("/etc/familiar",)
"""Directories under ``SYSTEM_PATHS`` hidden behind an empty tmpfs (the system unit's
``EnvironmentFile`` with the daemon's secrets lives in ``/etc/familiar``)."""
_PROBE_TIMEOUT = 10.0
EXEC_SOCKET_ENV = "FAMILIAR_EXEC_SOCKET"
"""Set by the daemon's rendered unit: the ``ListenStream=`` of ``familiar-exec.socket``."""

NAMESPACES = ("--unshare-user", "--unshare-ipc", "--unshare-pid")
"""The namespaces every command gets in bubblewrap (plus a network one with ``network =
false``). Not UTS or cgroup ones: without capabilities on the host the command cannot set
the hostname or write a cgroup anyway."""


def command_env(workspace: Path, passthrough: Iterable[str] = ()) -> dict[str, str]:
    """The environment of a command: the allow-listed variables of the daemon, no more.

    Args:
        workspace: becomes ``HOME``.
        passthrough: more variable names copied from the daemon when set
            (``tools.exec.env_passthrough``).
    """
    env = {"PATH": _DEFAULT_PATH, "LANG": "C.UTF-8", "TERM": "dumb"}
    for name in (*BASE_ENV, *passthrough):
        value = os.environ.get(name)
        if value is not None:
            env[name] = value
    env["HOME"] = str(workspace)
    return env


class Sandbox(Protocol):
    """How a shell command line is started: the argv to spawn and its environment."""

    @property
    def name(self) -> str:
        """``bwrap`` or ``none``: what ``familiar doctor`` reports."""
        ...

    def protect(self, cwd: Path) -> list[str]:
        """Options that make the workspace's control files read-only (touches the disk)."""
        ...

    def argv(self, command: str, cwd: Path, protect: Sequence[str] = ()) -> list[str]:
        """The program and arguments that run ``command`` with ``cwd`` as working directory.

        ``protect`` is what :meth:`protect` returned for ``cwd``.
        """
        ...

    def env(self, cwd: Path) -> dict[str, str]:
        """The whole environment to spawn ``argv`` with (``HOME`` = ``cwd``)."""
        ...


@dataclass(frozen=True, kw_only=True)
class NoSandbox:
    """``/bin/sh -c`` on the host, with the allow-listed environment only."""

    passthrough: tuple[str, ...] = ()
    name: str = "none"

    def protect(self, cwd: Path) -> list[str]:
        return []  # nothing to mount: on the bare host a command can write anything

    def argv(self, command: str, cwd: Path, protect: Sequence[str] = ()) -> list[str]:
        return ["/bin/sh", "-c", command]

    def env(self, cwd: Path) -> dict[str, str]:
        return command_env(cwd, self.passthrough)


@dataclass(frozen=True, kw_only=True)
class BwrapSandbox:
    """``/bin/sh -c`` inside bubblewrap; build one with :meth:`detect`.

    The workspace is bound read-write at its real path and is the working directory;
    ``mounts`` (the system directories) are read-only; nothing else of the host's
    filesystem is visible. The environment is not put on the command line (other users
    can read a command line): ``bwrap`` is spawned with the allow-listed environment
    and hands exactly that to the command.
    """

    binary: str
    mounts: tuple[tuple[str, ...], ...]
    """bwrap options for the system directories, e.g. ``("--ro-bind", "/usr", "/usr")``."""
    network: bool = True
    passthrough: tuple[str, ...] = ()
    name: str = "bwrap"

    @classmethod
    def detect(cls, *, network: bool = True, passthrough: tuple[str, ...] = ()) -> BwrapSandbox:
        """Find ``bwrap`` on ``PATH`` and the system directories (touches the filesystem).

        Raises:
            FileNotFoundError: no ``bwrap`` on ``PATH``.
        """
        binary = shutil.which("bwrap")
        if binary is None:
            raise FileNotFoundError("bwrap (package bubblewrap) is not on PATH")
        return cls(binary=binary, mounts=_system_mounts(), network=network, passthrough=passthrough)

    def _base(self) -> list[str]:
        args = [self.binary]
        for mount in self.mounts:
            args += mount
        args += ["--tmpfs", "/tmp", "--proc", "/proc", "--dev", "/dev", *NAMESPACES]
        if not self.network:
            args.append("--unshare-net")
        # --new-session: no TIOCSTI into a terminal; --die-with-parent: if bwrap dies
        # (our kill at the timeout) every process in the sandbox gets SIGKILL.
        args += ["--die-with-parent", "--new-session", "--cap-drop", "ALL"]
        return args

    def protect(self, cwd: Path) -> list[str]:
        return sandbox_control_mounts(cwd)

    def argv(self, command: str, cwd: Path, protect: Sequence[str] = ()) -> list[str]:
        where = str(cwd)
        return [
            *self._base(),
            *("--bind", where, where),
            *protect,
            *("--remount-ro", "/"),
            *("--chdir", where),
            *("/bin/sh", "-c", command),
        ]

    def probe_argv(self) -> list[str]:
        """Runs ``true`` with every option a real command gets, the workspace aside."""
        return [*self._base(), "--remount-ro", "/", "true"]

    def env(self, cwd: Path) -> dict[str, str]:
        return command_env(cwd, self.passthrough)


@dataclass(frozen=True, kw_only=True)
class SystemdSandbox:
    """Each command is one connection to the exec socket unit (`core.tools.exec_client`),
    whose instance runs ``/bin/sh -c`` under the unit's sandboxing."""

    socket: Path
    network: bool = True
    passthrough: tuple[str, ...] = ()
    name: str = "systemd"

    def protect(self, cwd: Path) -> list[str]:
        return []  # the unit's own ReadOnlyPaths= protect the guarded directories

    def argv(self, command: str, cwd: Path, protect: Sequence[str] = ()) -> list[str]:
        return ["/bin/sh", "-c", command]

    def env(self, cwd: Path) -> dict[str, str]:
        return command_env(cwd, self.passthrough)


def socket_from_env(environ: dict[str, str] | None = None) -> Path | None:
    """The exec socket the daemon's unit names (``FAMILIAR_EXEC_SOCKET``), else None."""
    value = (os.environ if environ is None else environ).get(EXEC_SOCKET_ENV, "")
    return Path(value) if value else None


def _systemd_choice(config: ExecConfig, socket: Path) -> SandboxChoice:
    """The exec unit, whether or not its socket listens now: a command sent while it
    does not fails with a clear error, and never runs on the host instead."""
    sandbox = SystemdSandbox(
        socket=socket, network=config.network, passthrough=tuple(config.env_passthrough)
    )
    problem = ""
    try:
        if not stat.S_ISSOCK(socket.stat().st_mode):
            problem = f"{socket} is not a socket"
    except OSError as exc:
        problem = f"the exec unit's socket {socket} is missing ({exc.strerror})"
    if problem:
        problem += "; is familiar-exec.socket running? (`familiar service install` writes it)"
    return SandboxChoice(sandbox=sandbox, problem=problem, mode=config.sandbox)


def _system_mounts() -> tuple[tuple[str, ...], ...]:
    mounts: list[tuple[str, ...]] = []
    for path in SYSTEM_PATHS:
        if os.path.islink(path):
            mounts.append(("--symlink", os.readlink(path), path))
        elif os.path.isdir(path):
            mounts.append(("--ro-bind", path, path))
    mounts += [("--tmpfs", path) for path in _MASKED if os.path.isdir(path)]
    # DNS: /etc/resolv.conf often links into /run (systemd-resolved), which is not shown.
    resolv = os.path.realpath("/etc/resolv.conf")
    if os.path.isfile(resolv) and not any(
        resolv.startswith(p + "/") for p in SYSTEM_PATHS if not os.path.islink(p)
    ):
        mounts.append(("--ro-bind", resolv, resolv))
    return tuple(mounts)


@dataclass(frozen=True, kw_only=True)
class SandboxChoice:
    """The outcome of :func:`choose_sandbox`.

    Attributes:
        sandbox: what commands run in; ``None`` when ``sandbox = "bwrap"`` was
            required and does not work (every command then fails with ``problem``).
        problem: why bubblewrap is not used (empty when it is, or when ``none`` was
            configured); with the exec unit, why its socket does not answer now.
    """

    sandbox: Sandbox | None
    problem: str = ""
    mode: Literal["auto", "bwrap", "none", "systemd"] = "auto"

    def as_json(self) -> dict[str, str | None]:
        """``{"name": "bwrap" | "none" | None, "mode", "problem"}`` (None: unavailable)."""
        name = None if self.sandbox is None else self.sandbox.name
        return {"name": name, "mode": self.mode, "problem": self.problem}

    def require(self) -> Sandbox:
        """The sandbox, or :class:`ToolFailed` saying why there is none."""
        if self.sandbox is None:
            raise ToolFailed(f"exec is unavailable: {self.problem}")
        return self.sandbox


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _read_available(fd: int, limit: int = 64 * 1024) -> str:
    """What is in the pipe now (its writers are gone or killed), then close it."""
    chunks: list[bytes] = []
    try:
        os.set_blocking(fd, False)
        while sum(map(len, chunks)) < limit:
            chunk = os.read(fd, limit)
            if not chunk:
                break
            chunks.append(chunk)
    except BlockingIOError:
        pass
    finally:
        os.close(fd)
    return b"".join(chunks).decode(errors="replace").strip()


async def _probe(config: ExecConfig) -> tuple[BwrapSandbox | None, str]:
    passthrough = tuple(config.env_passthrough)
    try:
        sandbox = await asyncio.to_thread(
            BwrapSandbox.detect, network=config.network, passthrough=passthrough
        )
    except FileNotFoundError as exc:
        return None, str(exc)
    # stderr is a pipe we own, so waiting ends when bwrap exits even if a half-built
    # sandbox's process (bwrap killed by a system-call filter) still holds the pipe.
    read_fd, write_fd = os.pipe()
    try:
        proc = await asyncio.create_subprocess_exec(
            *sandbox.probe_argv(),
            env=sandbox.env(Path("/")),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=write_fd,
            start_new_session=True,
        )
    except OSError as exc:
        os.close(read_fd)
        return None, f"cannot run {sandbox.binary}: {exc}"
    finally:
        os.close(write_fd)
    try:
        async with asyncio.timeout(_PROBE_TIMEOUT):
            code = await proc.wait()
    except TimeoutError:
        code = None
    _kill_group(proc.pid)  # what is left of a sandbox that failed half-way
    await proc.wait()
    stderr = _read_available(read_fd)
    if code is None:
        return None, f"`{sandbox.binary} ... true` did not finish in {_PROBE_TIMEOUT:g}s"
    if code != 0:
        detail = stderr or f"exit code {code}"
        unit = await asyncio.to_thread(systemd_unit)
        why = explain_probe_failure(stderr, code, unit=unit)
        return None, f"`{sandbox.binary} ... true` failed: {detail} ({why})"
    return sandbox, ""


async def choose_sandbox(config: ExecConfig) -> SandboxChoice:
    """Decide where commands run, per ``tools.exec.sandbox``; runs ``bwrap ... true`` once.

    Under the units ``familiar service install`` writes (``FAMILIAR_EXEC_SOCKET`` is
    set), ``auto`` and ``systemd`` take the exec unit; ``systemd`` elsewhere is an
    error. Otherwise ``auto`` takes bubblewrap when the probe succeeds, else the bare
    host (and logs a warning); ``bwrap`` requires it; ``none`` never probes.
    """
    passthrough = tuple(config.env_passthrough)
    if config.sandbox == "none":
        return SandboxChoice(sandbox=NoSandbox(passthrough=passthrough), mode="none")
    socket = socket_from_env()
    if socket is not None and config.sandbox in ("auto", "systemd"):
        return _systemd_choice(config, socket)
    if config.sandbox == "systemd":
        return SandboxChoice(
            sandbox=None,
            problem=f'tools.exec.sandbox = "systemd" but {EXEC_SOCKET_ENV} is not set: only '
            "the units `familiar service install` writes run commands in the exec unit",
            mode="systemd",
        )
    bwrap, problem = await _probe(config)
    if bwrap is not None:
        return SandboxChoice(sandbox=bwrap, mode=config.sandbox)
    if config.sandbox == "bwrap":
        return SandboxChoice(
            sandbox=None,
            problem=f'tools.exec.sandbox = "bwrap" but bubblewrap does not work: {problem}',
            mode="bwrap",
        )
    logger.warning(
        "exec runs commands WITHOUT a sandbox (they can read anything this user can): %s",
        problem,
    )
    return SandboxChoice(sandbox=NoSandbox(passthrough=passthrough), problem=problem, mode="auto")


class SandboxSelector:
    """Chooses the sandbox on first use and keeps the choice (one probe per process)."""

    def __init__(self, config: ExecConfig) -> None:
        self._config = config
        self._choice: SandboxChoice | None = None
        self._lock = asyncio.Lock()

    async def choice(self) -> SandboxChoice:
        """What commands run in here (probed on first use, then kept)."""
        if self._choice is None:
            async with self._lock:
                if self._choice is None:
                    self._choice = await choose_sandbox(self._config)
        return self._choice

    async def get(self) -> Sandbox:
        """The sandbox to run a command in.

        Raises:
            ToolFailed: ``sandbox = "bwrap"`` is configured and bubblewrap does not work.
        """
        return (await self.choice()).require()
