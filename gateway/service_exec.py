"""Render the exec units ``familiar service install`` writes beside the daemon's unit.

``familiar-exec.socket`` (``Accept=yes``) starts one ``familiar-exec@.service`` per
connection; the daemon (`core.tools.exec_client`) sends each ``exec`` command there, and
the instance runs it with `core.tools.exec_server` under the unit's own sandbox. The
daemon's unit can then forbid namespaces and mount calls (bubblewrap needed both).

Commands cannot see the daemon's processes: both units have ``PrivateUsers=yes``, so
each runs in a user namespace of its own, and the kernel lets a process read another's
``/proc/PID/environ`` (or reach its files through ``/proc/PID/root``) only within one
user namespace (or with ``CAP_SYS_PTRACE``); ``ProtectProc=invisible`` hides them too.
As defence in depth a system instance also runs in another group than the daemon's
(`exec_group`), the daemon's user still (the workspace is its files).
"""

from __future__ import annotations

import grp
from dataclasses import dataclass
from pathlib import Path

from core.errors import ConfigError
from gateway.service_templates import PLACEHOLDER, quote, template_text

__all__ = [
    "EXEC_GROUPS",
    "EXEC_SERVICE_NAME",
    "EXEC_SOCKET_NAME",
    "ExecUnitSettings",
    "exec_group",
    "exec_settings_for",
    "exec_socket_path",
    "render_exec_units",
]

EXEC_SOCKET_NAME = "familiar-exec.socket"
EXEC_SERVICE_NAME = "familiar-exec@.service"
EXEC_GROUPS = ("nogroup", "nobody")
"""Groups a system exec instance runs in (the first that exists and is not the daemon's)."""
_SERVER = Path("core") / "tools" / "exec_server.py"
_HOME_DIRS = (Path("/home"), Path("/root"), Path("/run/user"))
_RUNTIME_MARGIN = 60
"""Seconds RuntimeMaxSec= gives beyond tools.exec.max_timeout (the unit's own backstop)."""


@dataclass(frozen=True, kw_only=True)
class ExecUnitSettings:
    """What the exec units are rendered from.

    Attributes:
        home: FAMILIAR_HOME (hidden from commands but for the workspace).
        workspace: the commands' working tree (writable).
        python: the interpreter that runs `core.tools.exec_server`.
        code_root: the directory holding ``core/``.
        network: ``tools.exec.network``; false renders ``PrivateNetwork=yes``.
        max_timeout: ``tools.exec.max_timeout``, the longest command the unit allows.
        socket: the socket's path; default `exec_socket_path`.
    """

    home: Path
    workspace: Path
    python: str
    code_root: Path
    network: bool = True
    max_timeout: float = 600.0
    socket: str | None = None


def exec_socket_path(kind: str) -> str:
    """``ListenStream=`` of the socket (and ``FAMILIAR_EXEC_SOCKET`` of the daemon)."""
    return "/run/familiar/exec.sock" if kind == "system" else "%t/familiar/exec.sock"


def exec_group(daemon_group: str) -> str:
    """The group of a system exec instance: the first of `EXEC_GROUPS` that exists and
    is not the daemon's, else the daemon's own (user namespaces keep them apart)."""
    for name in EXEC_GROUPS:
        try:
            grp.getgrnam(name)
        except KeyError:
            continue
        if name != daemon_group:
            return name
    return daemon_group


def _under_home(path: Path) -> bool:
    return any(path == p or p in path.parents for p in _HOME_DIRS)


def _read_only_binds(settings: ExecUnitSettings) -> list[Path]:
    """What the instance needs from home directories (``ProtectHome=tmpfs`` hides them):
    the virtualenv, the interpreter it links to, and the code."""
    python = Path(settings.python)
    wanted = [python.parent.parent, python.resolve().parent.parent, settings.code_root]
    found: list[Path] = []
    for path in wanted:
        if _under_home(path) and not any(path == p or p in path.parents for p in found):
            found = [p for p in found if path not in p.parents] + [path]
    return found


def render_exec_units(
    kind: str, settings: ExecUnitSettings, *, user: str | None, group: str | None
) -> dict[str, str]:
    """``{unit file name: text}`` of the socket and the service template.

    Args:
        kind: ``system`` or ``user``.
        settings: paths and the ``[tools.exec]`` values the units carry.
        user: the daemon's account (system units: the socket's owner and the
            instance's user).
        group: the daemon's group (the socket's group); the instance runs in
            `exec_group` of it.

    Raises:
        ConfigError: a relative path, a system unit without a user, a value a unit file
            cannot carry.
    """
    from core.memory.files import MEMORY_DIR  # the tools' guard of global memory

    for path in (settings.home, settings.workspace):
        if not path.is_absolute():
            raise ConfigError(f"{path} must be an absolute path")
    server = settings.code_root / _SERVER
    argv = [settings.python, "-I", str(server), "--workspace", str(settings.workspace)]
    argv += ["--max-timeout", f"{settings.max_timeout:g}"]
    argv += ["--network", "on" if settings.network else "off"]
    if kind == "system":
        if not user:
            raise ConfigError("a system unit needs a user to run as", key="user")
        owner = f"SocketUser={quote(user)}\nSocketGroup={quote(group or user)}\n"
        account = f"User={quote(user)}\nGroup={exec_group(group or user)}\n"
        proc = "ProtectProc=invisible\nRemoveIPC=yes\n"
    else:
        owner = account = proc = ""
    if settings.network:
        network = "RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6\n"
    else:
        network = "PrivateNetwork=yes\nRestrictAddressFamilies=AF_UNIX\nIPAddressDeny=any\n"
    binds = "".join(f"BindReadOnlyPaths={quote(str(p))}\n" for p in _read_only_binds(settings))
    socket = settings.socket or exec_socket_path(kind)
    values = {
        "@SOCKET@": quote(settings.socket) if settings.socket else socket,
        "@SOCKET_PATH@": quote(f"-{settings.socket}") if settings.socket else f"-{socket}",
        "@SOCKET_OWNER@": owner,
        "@EXEC_SERVER@": " ".join(quote(a, exec_line=True) for a in argv),
        "@ACCOUNT@": account,
        "@RUNTIME_MAX@": f"{int(settings.max_timeout) + _RUNTIME_MARGIN}s",
        "@HOME_TMPFS@": quote(f"{settings.home}:ro"),
        "@WORKSPACE_BIND@": quote(f"-{settings.workspace}"),
        "@GUARDED@": quote(f"-{settings.workspace / MEMORY_DIR}"),
        "@READ_ONLY_BINDS@": binds,
        "@NETWORK@": network,
        "@PROC@": proc,
        "@CTL@": "" if kind == "system" else "--user ",
    }
    units = {}
    for name in (EXEC_SOCKET_NAME, EXEC_SERVICE_NAME):
        text = template_text(name)
        for token, value in values.items():
            text = text.replace(token, value)
        if leftover := PLACEHOLDER.search(text):
            raise ConfigError(f"unit template {name} has an unknown placeholder {leftover.group()}")
        units[name] = text
    return units


def exec_settings_for(home: Path, *, python: str, code_root: Path) -> ExecUnitSettings:
    """The exec units' settings from ``<home>/config.toml`` (and FAMILIAR_* variables).

    Raises:
        ConfigError: the configuration is invalid (nothing is written then).
    """
    # Here, not at the top: `familiar service --help` must not import the configuration.
    from gateway.config import load_config, workspace_dir

    config = load_config(home)
    return ExecUnitSettings(
        home=home,
        workspace=workspace_dir(home, config).absolute(),
        python=python,
        code_root=code_root,
        network=config.tools.exec.network,
        max_timeout=config.tools.exec.max_timeout,
    )
