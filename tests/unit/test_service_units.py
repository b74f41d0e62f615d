"""Unit templates pass `systemd-analyze verify`; ServiceManager drives systemctl correctly."""

from __future__ import annotations

import os
import pwd
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from core.errors import ConfigError
from gateway.service import (
    CODE_ROOT,
    ROLE_UNIT_NAMES,
    UNIT_NAME,
    CommandResult,
    ServiceError,
    ServiceManager,
    UnitKind,
    exec_start_for,
    render_role_unit,
    render_unit,
    run_command,
)
from gateway.service_exec import (
    EXEC_SERVICE_NAME,
    EXEC_SOCKET_NAME,
    ExecUnitSettings,
    render_exec_units,
)
from tests.conftest import short_home

ME = pwd.getpwuid(os.getuid()).pw_name
ANYWHERE: tuple[Path, ...] = ()
"""No private /tmp: for tests of what follows the location check, which pass from a
checkout under /tmp too (the check has tests of its own, where ``tmp_path`` stands for
/tmp wherever it is)."""


def _render(kind: UnitKind, home: Path) -> str:
    return render_unit(kind, exec_start=exec_start_for(home), home=home, user="familiar")


# --- rendering ---------------------------------------------------------------------


def test_system_unit_content() -> None:
    text = render_unit(
        "system",
        exec_start=exec_start_for(Path("/var/lib/familiar"), python="/opt/familiar/bin/python"),
        home=Path("/var/lib/familiar"),
        user="familiar",
    )
    lines = text.splitlines()
    for line in [
        "Type=notify",
        "NotifyAccess=main",
        "ExecStart=/opt/familiar/bin/python -P -m gateway.cli gateway --home /var/lib/familiar",
        "Environment=FAMILIAR_HOME=/var/lib/familiar",
        "EnvironmentFile=-/etc/familiar/env",
        "User=familiar",
        "Group=familiar",
        "StateDirectory=familiar",
        "ProtectHome=yes",
        "ProtectSystem=strict",
        "ReadWritePaths=/var/lib/familiar",
        "WatchdogSec=30s",
        "Restart=on-failure",
        "UMask=0077",
        "After=network-online.target familiar-exec.socket",
        "Wants=network-online.target familiar-exec.socket",
        "WantedBy=multi-user.target",
        "Environment=FAMILIAR_EXEC_SOCKET=/run/familiar/exec.sock",
        "RestrictNamespaces=yes",
        "ProtectKernelTunables=yes",
        "ProtectKernelLogs=yes",
        "ProcSubset=pid",
    ]:
        assert line in lines
    assert re.search(r"@[A-Z_]+@", text) is None


def test_user_unit_content(tmp_path: Path) -> None:
    home = tmp_path / "home"
    lines = render_unit("user", exec_start="/bin/true", home=home, user=None).splitlines()
    for line in [
        "ExecStart=/bin/true",
        f"Environment=FAMILIAR_HOME={home}",
        "EnvironmentFile=-%h/.config/familiar/env",
        "ProtectHome=read-only",
        f"ReadWritePaths={home}",
        "WantedBy=default.target",
        "Environment=FAMILIAR_EXEC_SOCKET=%t/familiar/exec.sock",
        "RestrictNamespaces=yes",
    ]:
        assert line in lines
    assert not any(line.startswith(("User=", "Group=", "StateDirectory=")) for line in lines)


def test_system_unit_relaxes_protect_home_for_paths_under_home() -> None:
    text = render_unit(
        "system",
        exec_start="/home/ann/familiar/.venv/bin/python -m gateway.cli gateway",
        home=Path("/var/lib/familiar"),
        user="ann",
    )
    assert "ProtectHome=read-only" in text.splitlines()


def test_values_are_quoted_and_specifiers_escaped() -> None:
    home = Path("/srv/my home/100%")
    text = render_unit(
        "user", exec_start=exec_start_for(home, python="/opt/py$x/python"), home=home, user=None
    )
    lines = text.splitlines()
    assert (
        'ExecStart=/opt/py$$x/python -P -m gateway.cli gateway --home "/srv/my home/100%%"' in lines
    )
    assert 'Environment="FAMILIAR_HOME=/srv/my home/100%%"' in lines
    assert 'ReadWritePaths="/srv/my home/100%%"' in lines


@pytest.mark.parametrize("home", [Path("relative/home"), Path("/srv/a\nb")])
def test_bad_home_is_a_config_error(home: Path) -> None:
    with pytest.raises(ConfigError):
        render_unit("user", exec_start="/bin/true", home=home, user=None)


def test_system_unit_requires_a_user() -> None:
    with pytest.raises(ConfigError, match="user"):
        render_unit("system", exec_start="/bin/true", home=Path("/var/lib/familiar"), user=None)


# --- systemd-analyze verify ----------------------------------------------------------


@pytest.fixture
def systemd_analyze() -> str:
    path = shutil.which("systemd-analyze")
    if path is None:
        reason = "systemd-analyze not installed (apt-get install systemd; `make deps-system`)"
        if os.environ.get("CI") == "true":
            pytest.fail(reason + "; CI=true requires it")
        pytest.skip(reason)
    return path


def _verify(analyze: str, kind: UnitKind, unit: Path, tmp_path: Path) -> str:
    """Run verify and return everything it printed: warnings come with exit status 0."""
    env = dict(os.environ, SYSTEMD_LOG_COLOR="0")
    argv = [analyze, "verify", str(unit)]
    runtime: Path | None = None
    if kind == "user":
        # Short: the user units' socket paths under it must fit a Unix socket address
        # (a pytest-xdist worker's tmp_path does not).
        runtime = short_home()
        env["XDG_RUNTIME_DIR"] = str(runtime)
        argv = [analyze, "--user", "verify", str(unit)]
    try:
        proc = subprocess.run(
            argv, capture_output=True, text=True, env=env, timeout=60, stdin=subprocess.DEVNULL
        )
    finally:
        if runtime is not None:
            shutil.rmtree(runtime, ignore_errors=True)
    output = (proc.stdout + proc.stderr).strip()
    return output if proc.returncode == 0 else f"rc={proc.returncode}\n{output}"


@pytest.mark.parametrize("kind", ["system", "user"])
@pytest.mark.parametrize("home_name", ["familiar", "my home 100%"])
def test_rendered_unit_passes_systemd_analyze_verify(
    systemd_analyze: str, tmp_path: Path, kind: UnitKind, home_name: str
) -> None:
    unit = tmp_path / "units" / UNIT_NAME
    unit.parent.mkdir()
    unit.write_text(_render(kind, tmp_path / home_name))
    assert _verify(systemd_analyze, kind, unit, tmp_path) == ""


@pytest.mark.parametrize("kind", ["system", "user"])
@pytest.mark.parametrize("network", [True, False])
def test_rendered_exec_units_pass_systemd_analyze_verify(
    systemd_analyze: str, tmp_path: Path, kind: UnitKind, network: bool
) -> None:
    home = tmp_path / "my home 100%"
    settings = ExecUnitSettings(
        home=home, workspace=home / "workspace", python=sys.executable, code_root=CODE_ROOT,
        network=network,
    )  # fmt: skip
    units = render_exec_units(kind, settings, user="root", group="root")
    (tmp_path / "units").mkdir()
    for name, text in units.items():
        (tmp_path / "units" / name).write_text(text)
    socket = tmp_path / "units" / EXEC_SOCKET_NAME
    instance = tmp_path / "units" / "familiar-exec@1.service"
    instance.symlink_to(EXEC_SERVICE_NAME)
    for unit in (socket, instance):
        assert _verify(systemd_analyze, kind, unit, tmp_path) == ""
    service = units[EXEC_SERVICE_NAME].splitlines()
    assert ("PrivateNetwork=yes" in service) is not network
    assert f'BindPaths="-{home}/workspace"'.replace("%", "%%") in service
    assert f'TemporaryFileSystem="{home}:ro"'.replace("%", "%%") in service
    if kind == "system":
        assert "User=root" in service and "Group=nogroup" in service
        assert "SocketUser=root" in units[EXEC_SOCKET_NAME].splitlines()
    else:
        assert not any(line.startswith(("User=", "Group=")) for line in service)


def test_verify_check_catches_a_bad_key(systemd_analyze: str, tmp_path: Path) -> None:
    # Guards the guard: unknown keys print a warning but exit 0.
    unit = tmp_path / UNIT_NAME
    unit.write_text(_render("system", tmp_path) + "\n[Service]\nRestartSec=fivesec\n")
    assert "fivesec" in _verify(systemd_analyze, "system", unit, tmp_path)


# --- ServiceManager --------------------------------------------------------------------


class FakeSystemctl:
    """Records argv; answers with a scripted result per systemctl verb."""

    def __init__(self, results: dict[str, CommandResult] | None = None) -> None:
        self.calls: list[list[str]] = []
        self.results = results or {}

    async def __call__(self, argv: Sequence[str]) -> CommandResult:
        self.calls.append(list(argv))
        verb = next(a for a in argv[1:] if not a.startswith("--"))
        return self.results.get(verb, CommandResult(0, "", ""))


def _manager(tmp_path: Path, fake: FakeSystemctl) -> ServiceManager:
    return ServiceManager(
        run=fake,
        user_unit_dir=tmp_path / "user-units",
        system_unit_dir=tmp_path / "system-units",
        python=sys.executable,
        private_tmp=ANYWHERE,
    )


async def test_install_user_unit_now(tmp_path: Path) -> None:
    fake = FakeSystemctl()
    home = tmp_path / "fam"
    lines = await _manager(tmp_path, fake).install("user", now=True, home=home)

    unit = tmp_path / "user-units" / UNIT_NAME
    assert unit.read_text() == render_unit(
        "user", exec_start=exec_start_for(home), home=home, user=None
    )
    assert unit.stat().st_mode & 0o777 == 0o644
    settings = ExecUnitSettings(
        home=home, workspace=home / "workspace", python=sys.executable, code_root=CODE_ROOT
    )
    for name, text in render_exec_units("user", settings, user=None, group=None).items():
        assert (tmp_path / "user-units" / name).read_text() == text
    assert home.is_dir()
    assert fake.calls == [
        ["systemctl", "--user", "daemon-reload"],
        ["systemctl", "--user", "enable", "--now", EXEC_SOCKET_NAME, UNIT_NAME],
    ]
    assert any(f"loginctl enable-linger {ME}" in line for line in lines)
    assert any(str(unit) in line for line in lines)


async def test_install_renders_the_exec_unit_from_the_config(tmp_path: Path) -> None:
    home = tmp_path / "fam"
    home.mkdir()
    (home / "config.toml").write_text(
        'workspace = "/srv/work"\n[tools.exec]\nnetwork = false\nmax_timeout = 120\n'
    )
    await _manager(tmp_path, FakeSystemctl()).install("user", home=home)
    service = (tmp_path / "user-units" / EXEC_SERVICE_NAME).read_text().splitlines()
    assert "PrivateNetwork=yes" in service and "BindPaths=-/srv/work" in service
    assert "RuntimeMaxSec=180s" in service
    assert any(
        line.endswith("--workspace /srv/work --max-timeout 120 --network off") for line in service
    )


async def test_an_invalid_config_stops_install_before_anything_is_written(tmp_path: Path) -> None:
    home = tmp_path / "fam"
    home.mkdir()
    (home / "config.toml").write_text("[tools.exec]\nnetwork = 3\n")
    fake = FakeSystemctl()
    with pytest.raises(ConfigError, match=r"tools\.exec\.network"):
        await _manager(tmp_path, fake).install("user", home=home)
    assert fake.calls == []
    assert not (tmp_path / "user-units").exists()


async def test_install_system_unit_without_now(tmp_path: Path) -> None:
    fake = FakeSystemctl()
    home = tmp_path / "state"
    lines = await _manager(tmp_path, fake).install("system", home=home, user=ME)

    text = (tmp_path / "system-units" / UNIT_NAME).read_text()
    assert f"User={ME}" in text.splitlines()
    assert f"ExecStart={exec_start_for(home)}" in text.splitlines()
    assert fake.calls == [
        ["systemctl", "daemon-reload"],
        ["systemctl", "enable", EXEC_SOCKET_NAME, UNIT_NAME],
    ]
    assert not any("linger" in line for line in lines)
    assert any("systemctl start familiar" in line for line in lines)


async def test_install_system_unit_for_missing_user_fails_before_writing(tmp_path: Path) -> None:
    fake = FakeSystemctl()
    with pytest.raises(ConfigError, match="useradd"):
        await _manager(tmp_path, fake).install(
            "system", home=tmp_path, user="no-such-familiar-user"
        )
    assert fake.calls == []
    assert not (tmp_path / "system-units").exists()


async def test_uninstall_disables_removes_and_reloads(tmp_path: Path) -> None:
    fake = FakeSystemctl()
    manager = _manager(tmp_path, fake)
    await manager.install("user", home=tmp_path / "fam")
    fake.calls.clear()

    lines = await manager.uninstall("user")

    assert fake.calls == [
        ["systemctl", "--user", "disable", "--now", UNIT_NAME, EXEC_SOCKET_NAME],
        ["systemctl", "--user", "daemon-reload"],
    ]
    assert not manager.unit_path("user").exists()
    assert not (tmp_path / "user-units" / EXEC_SOCKET_NAME).exists()
    assert not (tmp_path / "user-units" / EXEC_SERVICE_NAME).exists()
    assert (tmp_path / "fam").is_dir()  # data stays
    assert any("removed" in line for line in lines)


async def test_uninstall_when_not_installed_runs_nothing(tmp_path: Path) -> None:
    fake = FakeSystemctl()
    lines = await _manager(tmp_path, fake).uninstall("system")
    assert fake.calls == []
    assert "not installed" in lines[0]


async def test_status_reports_inactive_without_error(tmp_path: Path) -> None:
    fake = FakeSystemctl(
        {
            "is-active": CommandResult(3, "inactive\n", ""),
            "status": CommandResult(3, "○ familiar.service - familiar\n", ""),
        }
    )
    status = await _manager(tmp_path, fake).status("user")
    assert status.active_state == "inactive"
    assert not status.active
    assert not status.installed
    assert "familiar.service" in status.details
    assert fake.calls == [
        ["systemctl", "--user", "is-active", UNIT_NAME],
        ["systemctl", "--user", "status", "--no-pager", "--lines=20", UNIT_NAME],
    ]


async def test_status_active(tmp_path: Path) -> None:
    fake = FakeSystemctl({"is-active": CommandResult(0, "active\n", "")})
    assert (await _manager(tmp_path, fake).status("system")).active


async def test_failing_systemctl_shows_command_and_stderr(tmp_path: Path) -> None:
    fake = FakeSystemctl(
        {"daemon-reload": CommandResult(1, "", "Failed to connect to bus: No medium found\n")}
    )
    with pytest.raises(ServiceError) as info:
        await _manager(tmp_path, fake).install("user", home=tmp_path / "fam")
    err = info.value
    assert err.command == ("systemctl", "--user", "daemon-reload")
    assert err.returncode == 1
    assert "`systemctl --user daemon-reload` exited with 1" in str(err)
    assert "No medium found" in str(err)


async def test_missing_systemctl_is_a_clear_error(tmp_path: Path) -> None:
    async def no_systemctl(argv: Sequence[str]) -> CommandResult:
        raise FileNotFoundError(2, "No such file or directory", argv[0])

    manager = ServiceManager(run=no_systemctl, user_unit_dir=tmp_path / "u")
    with pytest.raises(ServiceError, match="systemctl not found") as info:
        await manager.status("user")
    assert info.value.returncode is None


async def test_default_runner_runs_real_commands() -> None:
    result = await run_command([sys.executable, "-c", "import sys; print('out'); sys.exit(3)"])
    assert result == CommandResult(3, "out\n", "")
    with pytest.raises(FileNotFoundError):
        await run_command(["/nonexistent/systemctl"])


# --- can the service user run it? -------------------------------------------------------


def test_units_do_not_restart_on_a_bad_config(tmp_path: Path) -> None:
    kinds: list[UnitKind] = ["system", "user"]
    for kind in kinds:
        assert "RestartPreventExitStatus=78" in _render(kind, tmp_path).splitlines()


@pytest.fixture
def shm() -> Iterator[Path]:
    """A directory outside /tmp (PrivateTmp would hide /tmp) that the test may chmod."""
    if not Path("/dev/shm").is_dir():
        pytest.skip("no /dev/shm")
    path = Path(tempfile.mkdtemp(prefix="fam-svc-", dir="/dev/shm"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _interpreter(directory: Path, mode: int = 0o755) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    python = directory / "python"
    python.write_text("#!/bin/sh\n")
    python.chmod(mode)
    return python


def _code(directory: Path) -> Path:
    (directory / "gateway").mkdir(parents=True)
    (directory / "gateway" / "cli.py").write_text("")
    for path in (directory, directory / "gateway"):
        path.chmod(0o755)
    (directory / "gateway" / "cli.py").chmod(0o644)
    return directory


async def test_interpreter_under_tmp_is_refused(tmp_path: Path, shm: Path) -> None:
    fake = FakeSystemctl()
    manager = ServiceManager(
        run=fake,
        user_unit_dir=tmp_path / "units",
        python=str(_interpreter(tmp_path / "venv" / "bin")),
        code_root=_code(shm / "src"),
        private_tmp=(tmp_path,),
    )
    with pytest.raises(ConfigError) as info:
        await manager.install("user", home=tmp_path / "fam")
    message = str(info.value)
    assert "PrivateTmp=yes" in message and "203/EXEC" in message
    assert "python3 -m venv" in message and "familiar service install --user" in message
    assert fake.calls == []
    assert not (tmp_path / "units").exists()


async def test_code_under_tmp_is_refused(tmp_path: Path, shm: Path) -> None:
    fake = FakeSystemctl()
    manager = ServiceManager(
        run=fake,
        user_unit_dir=tmp_path / "units",
        python=str(_interpreter(shm / "bin")),
        code_root=_code(tmp_path / "src"),
        private_tmp=(tmp_path,),
    )
    with pytest.raises(ConfigError, match=r"the code .* PrivateTmp"):
        await manager.install("user", home=tmp_path / "fam")
    assert fake.calls == []


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to install a unit for another user")
async def test_system_unit_refused_when_its_user_cannot_reach_the_interpreter(
    tmp_path: Path, shm: Path
) -> None:
    private = shm / "root-only"
    python = _interpreter(private / "bin")
    private.chmod(0o700)  # like /root, where pyenv and many venvs live
    fake = FakeSystemctl()
    manager = ServiceManager(
        run=fake,
        system_unit_dir=tmp_path / "units",
        python=str(python),
        code_root=_code(shm / "src"),
    )
    with pytest.raises(ConfigError) as info:
        await manager.install("system", home=tmp_path / "state", user="nobody")
    message = str(info.value)
    assert f"user nobody cannot enter {private} (mode 0700, owner root)" in message
    assert "python3 -m venv /opt/familiar" in message
    assert "familiar service install --system" in message
    assert fake.calls == []
    assert not (tmp_path / "units").exists()

    private.chmod(0o755)
    python.chmod(0o744)  # readable, not executable by others
    with pytest.raises(ConfigError, match=r"user nobody cannot run .*python \(mode 0744"):
        await manager.install("system", home=tmp_path / "state", user="nobody")

    python.chmod(0o755)
    (shm / "src" / "gateway").chmod(0o700)
    with pytest.raises(ConfigError, match=r"user nobody cannot read .*gateway \(mode 0700"):
        await manager.install("system", home=tmp_path / "state", user="nobody")

    (shm / "src" / "gateway").chmod(0o755)
    await manager.install("system", home=tmp_path / "state", user="nobody")
    text = (tmp_path / "units" / UNIT_NAME).read_text()
    assert f"ExecStart={python} -P -m gateway.cli" in text
    assert "User=nobody" in text.splitlines()


async def test_missing_interpreter_is_refused(tmp_path: Path, shm: Path) -> None:
    manager = ServiceManager(
        run=FakeSystemctl(),
        user_unit_dir=tmp_path / "units",
        python=str(shm / "no-python"),
        code_root=_code(shm / "src"),
    )
    with pytest.raises(ConfigError, match="no-python does not exist"):
        await manager.install("user", home=tmp_path / "fam")


def test_system_unit_relaxes_protect_home_for_a_symlink_into_a_home(shm: Path) -> None:
    python = shm / "python"
    python.symlink_to("/root/.pyenv/versions/3.11.7/bin/python3.11")
    text = render_unit(
        "system",
        exec_start=exec_start_for(Path("/var/lib/familiar"), python=str(python)),
        home=Path("/var/lib/familiar"),
        user="familiar",
        code_root=Path("/opt/familiar/lib"),
    )
    assert "ProtectHome=read-only" in text.splitlines()


@pytest.mark.parametrize("role", ["agent", "channels", "scheduler"])
def test_role_units_pass_systemd_analyze_verify(
    systemd_analyze: str, tmp_path: Path, role: str
) -> None:
    home = tmp_path / "my home"
    text = render_role_unit(role, home=home, user="familiar", python=sys.executable)
    name = ROLE_UNIT_NAMES[role]
    (exec_start,) = [line for line in text.splitlines() if line.startswith("ExecStart=")]
    assert exec_start.endswith(f' gateway --home "{home}" --role {role}')
    unit = tmp_path / "units" / (name.replace("@.", "@1.") if role == "agent" else name)
    unit.parent.mkdir()
    unit.write_text(text)
    assert _verify(systemd_analyze, "system", unit, tmp_path) == ""
    if role == "agent":
        assert "Description=familiar gateway: agent worker %i" in text


def test_a_role_unit_for_an_unknown_role_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown role"):
        render_role_unit("janitor", home=tmp_path, user="familiar")


# --- systemd-analyze security ------------------------------------------------------------

# Checks a unit may fail. The daemon's own needs: the network, local sockets, the host's
# root, the rtc node ProtectClock= adds. The exec unit: a command's ordinary needs (the
# network unless tools.exec.network = false, a /proc with its system files, empty fake
# homes). The user units: what offline analysis of a user unit cannot see (it runs as
# the user, not root) and what a user manager cannot do (mount a procfs: ProtectProc=,
# ProcSubset=; see docs/security/sandbox.md).
_DAEMON = {
    "PrivateNetwork=", "IPAddressDeny=", "RestrictAddressFamilies=~AF_(INET|INET6)",
    "RestrictAddressFamilies=~AF_UNIX", "RootDirectory=/RootImage=", "DeviceAllow=",
}  # fmt: skip
_EXEC = _DAEMON | {"ProcSubset=", "ProtectHome="}
_USER_UNIT = {"User=/DynamicUser=", "ProtectProc=", "ProcSubset=", "ProtectHome="}
# What the units must keep (issue 22 loosened them for bubblewrap; the exec unit made
# that unnecessary).
_STRICT = {
    "RestrictNamespaces=~user", "RestrictNamespaces=~pid", "RestrictNamespaces=~net",
    "RestrictNamespaces=~mnt", "RestrictNamespaces=~ipc", "SystemCallFilter=~@mount",
    "SystemCallFilter=~@privileged", "ProtectKernelTunables=", "ProtectKernelLogs=",
    "RestrictAddressFamilies=~AF_NETLINK", "CapabilityBoundingSet=~CAP_SYS_ADMIN",
    "NoNewPrivileges=", "PrivateTmp=", "ProtectSystem=", "PrivateDevices=",
}  # fmt: skip
# unit -> the highest exposure allowed. Before issue 22 the daemon's units scored 1.6 /
# 1.7 / 2.2 (system with the interpreter under /opt, under a home; user unit).
_CEILING = {
    "system-opt": 1.1, "system-home": 1.2, "user": 1.7, "role-agent": 1.1,
    "role-channels": 1.1, "role-scheduler": 1.1, "exec-system-opt": 1.2,
    "exec-system-home": 1.2, "exec-user": 1.6, "exec-system-no-network": 0.3,
    "exec-user-no-network": 0.8,
}  # fmt: skip


def _security(analyze: str, kind: UnitKind, unit: Path) -> tuple[float, set[str]]:
    argv = [analyze, *(["--user"] if kind == "user" else []), "security", "--offline=true"]
    env = dict(os.environ, SYSTEMD_COLORS="0", SYSTEMD_PAGER="")
    runtime = short_home()
    env["XDG_RUNTIME_DIR"] = str(runtime)
    try:
        proc = subprocess.run(
            [*argv, "--no-pager", unit.name],
            capture_output=True,
            text=True,
            env=env,
            cwd=unit.parent,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
    finally:
        shutil.rmtree(runtime, ignore_errors=True)
    score = re.search(r"Overall exposure level for \S+: (\d+\.\d)", proc.stdout)
    assert score is not None, proc.stdout + proc.stderr
    failing = {line.split()[1] for line in proc.stdout.splitlines() if line.startswith("✗")}
    return float(score.group(1)), failing


def _units_for_security(tmp_path: Path) -> dict[str, tuple[UnitKind, str, str]]:
    """name -> (kind, file name, text) of every unit familiar renders."""
    home = Path("/var/lib/familiar")
    opt_python, home_python = "/opt/familiar/bin/python", "/home/ann/familiar/.venv/bin/python"
    opt_code, home_code = Path("/opt/familiar/lib"), Path("/home/ann/familiar")
    opt = exec_start_for(home, python=opt_python)
    here = exec_start_for(home, python=home_python)
    user_home = tmp_path / "fam"
    units: dict[str, tuple[UnitKind, str, str]] = {
        "system-opt": (
            "system",
            UNIT_NAME,
            render_unit("system", exec_start=opt, home=home, user="familiar", code_root=opt_code),
        ),
        "system-home": (
            "system",
            UNIT_NAME,
            render_unit("system", exec_start=here, home=home, user="familiar"),
        ),
        "user": (
            "user",
            UNIT_NAME,
            render_unit("user", exec_start=here, home=user_home, user=None),
        ),
    }
    for role in ROLE_UNIT_NAMES:
        text = render_role_unit(
            role, home=home, user="familiar", python=opt_python, code_root=opt_code
        )
        units[f"role-{role}"] = ("system", UNIT_NAME, text)
    exec_variants: list[tuple[str, UnitKind, str, Path, bool]] = [
        ("exec-system-opt", "system", opt_python, opt_code, True),
        ("exec-system-home", "system", home_python, home_code, True),
        ("exec-user", "user", home_python, home_code, True),
        ("exec-system-no-network", "system", opt_python, opt_code, False),
        ("exec-user-no-network", "user", home_python, home_code, False),
    ]
    for name, kind, python, code, network in exec_variants:
        where = home if kind == "system" else user_home
        settings = ExecUnitSettings(
            home=where,
            workspace=where / "workspace",
            python=python,
            code_root=code,
            network=network,
        )
        account = "familiar" if kind == "system" else None
        text = render_exec_units(kind, settings, user=account, group=account)[EXEC_SERVICE_NAME]
        units[name] = (kind, EXEC_SERVICE_NAME, text)
    return units


@pytest.mark.parametrize("name", list(_CEILING))
def test_rendered_units_security_exposure(systemd_analyze: str, tmp_path: Path, name: str) -> None:
    kind, file_name, text = _units_for_security(tmp_path)[name]
    unit = tmp_path / "units" / file_name
    unit.parent.mkdir()
    unit.write_text(text)
    score, failing = _security(systemd_analyze, kind, unit)
    allowed = (_EXEC if name.startswith("exec-") else _DAEMON) | (
        _USER_UNIT if kind == "user" else {"ProtectHome="}
    )
    assert failing <= allowed, f"newly failing: {sorted(failing - allowed)}"
    assert not failing & _STRICT
    assert score <= _CEILING[name] <= 1.7, f"{name} scores {score}"
