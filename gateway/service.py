"""Render, install and inspect familiar's systemd unit (`familiar service ...`)."""

from __future__ import annotations

import asyncio
import os
import pwd
import shlex
import sys
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, NamedTuple

from core.errors import ConfigError, FamiliarError
from gateway.home import default_home as user_home
from gateway.service_checks import PRIVATE_TMP, SYSTEM_HOME, UnitChecks, account, under
from gateway.service_exec import (
    EXEC_SERVICE_NAME,
    EXEC_SOCKET_NAME,
    exec_settings_for,
    exec_socket_path,
    render_exec_units,
)
from gateway.service_templates import PLACEHOLDER, quote, template_text

__all__ = [
    "CODE_ROOT",
    "ROLE_UNIT_NAMES",
    "UNIT_NAME",
    "CommandResult",
    "CommandRunner",
    "ServiceError",
    "ServiceManager",
    "ServiceStatus",
    "UnitKind",
    "default_home",
    "exec_start_for",
    "render_role_unit",
    "render_unit",
    "run_command",
]

UnitKind = Literal["user", "system"]
UNIT_NAME = "familiar.service"
ROLE_UNIT_NAMES = {
    "agent": "familiar-agent@.service",
    "channels": "familiar-channels.service",
    "scheduler": "familiar-scheduler.service",
}
"""The unit file of each role, for a split deployment (a unit per role, or per host)."""
SYSTEM_UNIT_DIR = Path("/etc/systemd/system")

_TEMPLATE_FILES: dict[UnitKind, str] = {
    "system": "familiar.service",
    "user": "familiar-user.service",
}
# Directories that ProtectHome=yes makes inaccessible.
_HOME_DIRS = (Path("/home"), Path("/root"), Path("/run/user"))
# What `python -m gateway.cli` imports: the directory holding gateway/, core/, channels/.
CODE_ROOT = Path(__file__).resolve().parents[1]


class ServiceError(FamiliarError):
    """A systemctl command failed or could not be run.

    Attributes:
        command: the argv that failed.
        returncode: its exit status, or None if it could not be started.
        stderr: what it printed on stderr.
    """

    def __init__(
        self, message: str, *, command: Sequence[str], returncode: int | None, stderr: str = ""
    ) -> None:
        super().__init__(message)
        self.command = tuple(command)
        self.returncode = returncode
        self.stderr = stderr


class CommandResult(NamedTuple):
    """Outcome of one external command."""

    returncode: int
    stdout: str
    stderr: str


CommandRunner = Callable[[Sequence[str]], Awaitable[CommandResult]]


async def run_command(argv: Sequence[str]) -> CommandResult:
    """Run ``argv`` without a shell or stdin and capture its output.

    Raises:
        FileNotFoundError: the program does not exist.
    """
    proc = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "SYSTEMD_PAGER": "", "SYSTEMD_COLORS": "0"},
    )
    out, err = await proc.communicate()
    returncode = await proc.wait()
    return CommandResult(returncode, out.decode(errors="replace"), err.decode(errors="replace"))


def default_home(kind: UnitKind) -> Path:
    """Return the FAMILIAR_HOME a unit of this kind uses when none is given."""
    if kind == "system":
        return SYSTEM_HOME
    return user_home()


def exec_start_for(home: Path, *, python: str | None = None, role: str | None = None) -> str:
    """Build the ExecStart= line that runs ``familiar gateway`` from this virtualenv.

    ``-P`` keeps the working directory off ``sys.path``, so a stray ``gateway/``
    folder there cannot shadow ours.

    Args:
        home: FAMILIAR_HOME (absolute).
        python: interpreter; defaults to the running one (``sys.executable``).
        role: run only this role (``--role``); None runs the supervisor.
    """
    argv = [python or sys.executable, "-P", "-m", "gateway.cli", "gateway", "--home", str(home)]
    if role is not None:
        argv += ["--role", role]
    return " ".join(quote(a, exec_line=True) for a in argv)


def render_unit(
    kind: UnitKind,
    *,
    exec_start: str,
    home: Path,
    user: str | None,
    group: str | None = None,
    code_root: Path = CODE_ROOT,
    exec_socket: str | None = None,
) -> str:
    """Fill in a unit template.

    Args:
        kind: ``"system"`` (/etc/systemd/system) or ``"user"`` (systemctl --user).
        exec_start: the complete, already quoted ExecStart= value (see `exec_start_for`).
        home: FAMILIAR_HOME; absolute; made writable inside the sandbox.
        user: account the system unit runs as (required for ``"system"``, ignored
            for ``"user"``).
        group: group of the system unit; defaults to ``user``.
        code_root: where the ``gateway`` package is imported from.
        exec_socket: ``FAMILIAR_EXEC_SOCKET``, where ``exec`` commands go; default
            the exec socket unit's (`exec_socket_path`).

    Returns:
        The unit file text.

    Raises:
        ConfigError: ``home`` is relative, a system unit has no user, or a value
            contains characters a unit file cannot carry.
    """
    if not home.is_absolute():
        raise ConfigError(f"FAMILIAR_HOME must be an absolute path, got {home}", key="home")
    # Here, not at the top: `familiar service --help` must not import the tools.
    from core.tools.sandbox import EXEC_SOCKET_ENV

    values = {
        "@EXEC_START@": exec_start,
        "@HOME@": quote(str(home)),
        "@HOME_ENV@": quote(f"FAMILIAR_HOME={home}"),
        # The default keeps its specifier (%t: the user manager's runtime directory).
        "@EXEC_SOCKET_ENV@": quote(f"{EXEC_SOCKET_ENV}={exec_socket}")
        if exec_socket
        else f"{EXEC_SOCKET_ENV}={exec_socket_path(kind)}",
    }
    if kind == "system":
        if not user:
            raise ConfigError("a system unit needs a user to run as", key="user")
        executable = Path(shlex.split(exec_start)[0]) if exec_start.strip() else Path("/")
        # The venv's python is often a symlink into a home (pyenv under /root...).
        places = (home, executable, executable.resolve(), code_root)
        exposed = any(under(p, _HOME_DIRS) for p in places)
        values |= {
            "@USER@": quote(user),
            "@GROUP@": quote(group or user),
            # ProtectHome=yes would hide a home or virtualenv under /home or /root.
            "@PROTECT_HOME@": "read-only" if exposed else "yes",
        }
    text = template_text(_TEMPLATE_FILES[kind])
    for token, value in values.items():
        text = text.replace(token, value)
    if leftover := PLACEHOLDER.search(text):
        raise ConfigError(f"unit template {kind} has an unknown placeholder {leftover.group()}")
    return text


def render_role_unit(
    role: str,
    *,
    home: Path,
    user: str | None,
    group: str | None = None,
    python: str | None = None,
    code_root: Path = CODE_ROOT,
) -> str:
    """A system unit that runs one role (``familiar gateway --role ROLE``), sandboxed like
    the supervisor's unit; ``familiar-agent@.service`` is a template (one instance per
    worker: ``familiar-agent@1``, ``familiar-agent@2``...).

    Raises:
        ConfigError: an unknown role, or what `render_unit` refuses.
    """
    if role not in ROLE_UNIT_NAMES:
        raise ConfigError(f"unknown role {role!r} (one of {', '.join(ROLE_UNIT_NAMES)})")
    text = render_unit(
        "system",
        exec_start=exec_start_for(home, python=python, role=role),
        home=home,
        user=user,
        group=group,
        code_root=code_root,
    )
    what = "agent worker %i" if role == "agent" else f"{role} role"
    name = ROLE_UNIT_NAMES[role]
    # The template's own header says `service install` wrote it: this one says what did.
    head = (
        f"# {name}: the {role} role of a split deployment (see README, Scaling out),\n"
        f"# written by `familiar service role-unit {role}`. Writing it again overwrites\n"
        f"# this file: put local changes in a drop-in (`systemctl edit {name}`) and\n"
        "# secrets such as FAMILIAR_PROVIDER__API_KEY in /etc/familiar/env (mode 0600).\n"
    )
    body = text[text.index("[Unit]") :]
    return head + body.replace(
        "Description=familiar AI assistant gateway", f"Description=familiar gateway: {what}", 1
    )


@dataclass(frozen=True, slots=True)
class ServiceStatus:
    """What `ServiceManager.status` found.

    Attributes:
        kind: which manager was asked.
        unit_path: where the unit file is (or would be).
        installed: whether that file exists.
        active_state: ``systemctl is-active`` output: active, inactive, failed, ...
        details: ``systemctl status`` output (recent log lines included).
    """

    kind: UnitKind
    unit_path: Path
    installed: bool
    active_state: str
    details: str

    @property
    def active(self) -> bool:
        """True while the daemon is running."""
        return self.active_state == "active"


class ServiceManager:
    """Installs, removes and inspects the familiar unit through systemctl.

    Args:
        run: runs one command (argv) and returns its result; defaults to a subprocess.
        user_unit_dir: where user units go; defaults to
            ``$XDG_CONFIG_HOME/systemd/user`` (``~/.config/systemd/user``).
        system_unit_dir: where system units go; defaults to ``/etc/systemd/system``.
        python: interpreter for ExecStart=; defaults to ``sys.executable``.
        code_root: where ExecStart='s ``-m gateway.cli`` imports from; defaults to
            the directory this package was imported from.
        private_tmp: directories the unit does not see (``PrivateTmp=yes``), where
            neither the interpreter nor the code may be.
    """

    def __init__(
        self,
        *,
        run: CommandRunner = run_command,
        user_unit_dir: Path | None = None,
        system_unit_dir: Path = SYSTEM_UNIT_DIR,
        python: str | None = None,
        code_root: Path = CODE_ROOT,
        private_tmp: Sequence[Path] = PRIVATE_TMP,
    ) -> None:
        if user_unit_dir is None:
            config = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
            user_unit_dir = Path(config) / "systemd" / "user"
        self._run = run
        self._dirs: dict[UnitKind, Path] = {"user": user_unit_dir, "system": system_unit_dir}
        self._python = python or sys.executable
        self._code_root = code_root
        self._checks = UnitChecks(
            python=Path(self._python), code_root=code_root, private_tmp=private_tmp
        )

    def role_unit(self, role: str, *, home: Path, user: str = "familiar") -> str:
        """The system unit of one role (`render_role_unit`) for ``user``, after the
        checks `install` makes: the account exists, and can run the interpreter and
        read the code, neither of them under /tmp.

        Raises:
            ConfigError: an unknown role, or what `install` refuses. Nothing is written.
        """
        if role not in ROLE_UNIT_NAMES:
            raise ConfigError(f"unknown role {role!r} (one of {', '.join(ROLE_UNIT_NAMES)})")
        owner = account(user)
        self._checks.require(owner, command=f"familiar service role-unit {role}")
        return render_role_unit(
            role,
            home=home,
            user=owner[0],
            group=owner[1],
            python=self._python,
            code_root=self._code_root,
        )

    def unit_path(self, kind: UnitKind) -> Path:
        """Return where the unit file of this kind lives."""
        return self._dirs[kind] / UNIT_NAME

    async def install(
        self,
        kind: UnitKind,
        *,
        now: bool = False,
        home: Path | None = None,
        user: str | None = None,
    ) -> list[str]:
        """Write the unit and the exec units beside it (`gateway.service_exec`), reload
        systemd and enable the daemon and the exec socket (and start them with ``now``).

        Args:
            kind: user or system unit.
            now: also start (or restart into) the daemon.
            home: FAMILIAR_HOME; defaults to `default_home`. Created if missing.
            user: account of a system unit; defaults to ``familiar``. Must exist.

        Returns:
            Lines to show the user: what was done and what to do next.

        Raises:
            ConfigError: the user does not exist, cannot reach the interpreter or the
                code (the unit would fail with 203/EXEC), the configuration is invalid,
                or a unit file cannot be written. Nothing is written then.
            ServiceError: systemctl is missing or failed.
        """
        home = (home or default_home(kind)).expanduser().absolute()
        owner = account(user or "familiar") if kind == "system" else None
        self._checks.require(owner, command=f"familiar service install --{kind}")
        text = render_unit(
            kind,
            exec_start=exec_start_for(home, python=self._python),
            home=home,
            user=owner[0] if owner else None,
            group=owner[1] if owner else None,
            code_root=self._code_root,
        )
        settings = exec_settings_for(home, python=self._python, code_root=self._code_root)
        exec_units = render_exec_units(
            kind, settings, user=owner[0] if owner else None, group=owner[1] if owner else None
        )
        if not (kind == "system" and home == SYSTEM_HOME):  # StateDirectory= creates that one
            _make_home(home, owner)
        lines = []
        for path, body in [
            (self.unit_path(kind), text),
            *((self._dirs[kind] / name, unit) for name, unit in exec_units.items()),
        ]:
            _write_unit(path, body)
            lines.append(f"wrote {path}")
        await self._systemctl(kind, "daemon-reload")
        await self._systemctl(
            kind, "enable", *(["--now"] if now else []), EXEC_SOCKET_NAME, UNIT_NAME
        )
        ctl = _ctl(kind)
        started = " and started them" if now else ""
        lines.append(f"enabled {EXEC_SOCKET_NAME} (exec commands) and {UNIT_NAME}{started}")
        if not now:
            lines.append(f"start it with: {ctl} start familiar")
        lines.append(f"logs: journalctl {'--user ' if kind == 'user' else ''}-u familiar -f")
        if kind == "user":
            login = pwd.getpwuid(os.getuid()).pw_name
            lines.append(
                "to keep it running while you are logged out (and start it at boot), run: "
                f"loginctl enable-linger {login}"
            )
        return lines

    async def uninstall(self, kind: UnitKind) -> list[str]:
        """Stop and disable the daemon, remove its unit file and reload systemd.

        FAMILIAR_HOME (config, database, workspace) is left alone.

        Raises:
            ConfigError: the unit file cannot be removed.
            ServiceError: systemctl is missing or failed.
        """
        path = self.unit_path(kind)
        if not path.exists():
            return [f"{UNIT_NAME} is not installed ({path} does not exist)"]
        await self._systemctl(kind, "disable", "--now", UNIT_NAME, EXEC_SOCKET_NAME)
        removed = []
        for unit in (
            path,
            self._dirs[kind] / EXEC_SOCKET_NAME,
            self._dirs[kind] / EXEC_SERVICE_NAME,
        ):
            try:
                unit.unlink(missing_ok=True)
            except OSError as exc:
                raise ConfigError(f"cannot remove {unit}: {exc.strerror}") from exc
            removed.append(f"removed {unit}")
        await self._systemctl(kind, "daemon-reload")
        return [f"stopped and disabled {UNIT_NAME} and {EXEC_SOCKET_NAME}", *removed]

    async def status(self, kind: UnitKind) -> ServiceStatus:
        """Ask systemd whether the daemon runs and for its recent status.

        Raises:
            ServiceError: systemctl is missing or failed unexpectedly.
        """
        # is-active exits 3 (or 4 when there is no such unit) for "not running";
        # status the same: those are answers, not failures.
        active = await self._systemctl(kind, "is-active", UNIT_NAME, ok=(0, 3, 4))
        details = await self._systemctl(
            kind, "status", "--no-pager", "--lines=20", UNIT_NAME, ok=(0, 3, 4)
        )
        path = self.unit_path(kind)
        return ServiceStatus(
            kind=kind,
            unit_path=path,
            installed=path.exists(),
            active_state=active.stdout.strip() or "unknown",
            details=(details.stdout + details.stderr).rstrip(),
        )

    async def _systemctl(
        self, kind: UnitKind, *args: str, ok: Sequence[int] = (0,)
    ) -> CommandResult:
        argv = ["systemctl", *(["--user"] if kind == "user" else []), *args]
        shown = " ".join(argv)
        try:
            result = await self._run(argv)
        except FileNotFoundError as exc:
            raise ServiceError(
                f"`{shown}` failed: systemctl not found; is this a systemd host?",
                command=argv,
                returncode=None,
            ) from exc
        if result.returncode not in ok:
            stderr = result.stderr.strip()
            hint = ""
            if kind == "user" and "bus" in stderr.lower():
                hint = " (no user systemd instance here: log in as that user, not via su/sudo)"
            raise ServiceError(
                f"`{shown}` exited with {result.returncode}: {stderr or '(no stderr)'}{hint}",
                command=argv,
                returncode=result.returncode,
                stderr=result.stderr,
            )
        return result


def _ctl(kind: UnitKind) -> str:
    return "systemctl --user" if kind == "user" else "systemctl"


def _make_home(home: Path, owner: tuple[str, str, int, int] | None) -> None:
    # ReadWritePaths= on a missing directory makes the unit fail to start (226/NAMESPACE).
    if home.is_dir():
        return
    try:
        home.mkdir(mode=0o700, parents=True)
        if owner is not None:
            os.chown(home, owner[2], owner[3])
    except OSError as exc:
        raise ConfigError(f"cannot create FAMILIAR_HOME {home}: {exc.strerror}") from exc


def _write_unit(path: Path, text: str) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.chmod(0o644)
        tmp.replace(path)
    except PermissionError as exc:
        raise ConfigError(f"cannot write {path}: permission denied (run as root?)") from exc
    except OSError as exc:
        raise ConfigError(f"cannot write {path}: {exc.strerror}") from exc
