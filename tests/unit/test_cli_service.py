"""``familiar service install|status|uninstall|role-unit`` with a recording systemctl."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from gateway.cli import CliDeps
from gateway.service import UNIT_NAME, CommandResult, ServiceManager
from tests.unit.test_cli_client import cli
from tests.unit.test_cli_client import home as home
from tests.unit.test_service_units import ANYWHERE, ME, FakeSystemctl, _code, _interpreter
from tests.unit.test_service_units import shm as shm


def _deps(manager: ServiceManager) -> CliDeps:
    return CliDeps(service_manager=manager)


def test_service_install_status_uninstall(home: Path, tmp_path: Path) -> None:
    fake = FakeSystemctl({"is-active": CommandResult(0, "active\n", "")})
    deps = _deps(
        ServiceManager(
            run=fake, user_unit_dir=tmp_path / "units", python=sys.executable, private_tmp=ANYWHERE
        )
    )
    result = cli("service", "install", "--user", "--now", "--home", str(home), obj=deps)
    assert result.exit_code == 0, result.stderr
    unit = tmp_path / "units" / UNIT_NAME
    assert f"wrote {unit}" in result.stdout
    assert f"--home {home}" in unit.read_text()
    assert [
        "systemctl",
        "--user",
        "enable",
        "--now",
        "familiar-exec.socket",
        UNIT_NAME,
    ] in fake.calls

    status = cli("service", "status", "--user", obj=deps)
    assert status.exit_code == 0
    assert "installed, active" in status.stdout

    removed = cli("service", "uninstall", "--user", obj=deps)
    assert removed.exit_code == 0
    assert not unit.exists()


def test_service_failure_exits_1(tmp_path: Path, home: Path) -> None:
    fake = FakeSystemctl({"daemon-reload": CommandResult(1, "", "Failed to connect to bus\n")})
    deps = _deps(
        ServiceManager(
            run=fake, user_unit_dir=tmp_path, python=sys.executable, private_tmp=ANYWHERE
        )
    )
    result = cli("service", "install", "--user", "--home", str(home), obj=deps)
    assert result.exit_code == 1
    assert "Failed to connect to bus" in result.stderr


# --- role-unit: the checks of install, and a header that says what wrote it ----------


def test_a_role_unit_names_what_wrote_it(shm: Path, tmp_path: Path) -> None:
    manager = ServiceManager(python=str(_interpreter(shm / "bin")), code_root=_code(shm / "src"))
    args = ("service", "role-unit", "channels", "--user", ME, "--home", str(tmp_path))
    result = cli(*args, obj=_deps(manager))
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("# familiar-channels.service: the channels role")
    head = "\n".join(line for line in lines[: lines.index("[Unit]")])
    assert "written by `familiar service role-unit channels`" in head
    assert "systemctl edit familiar-channels.service" in head
    assert "service install" not in result.stdout
    assert f"User={ME}" in lines
    assert any(line.startswith(f"ExecStart={shm}/bin/python -P") for line in lines)


def test_a_role_unit_whose_interpreter_is_under_tmp_is_refused(shm: Path, tmp_path: Path) -> None:
    manager = ServiceManager(python="/tmp/venv/bin/python", code_root=_code(shm / "src"))
    args = ("service", "role-unit", "agent", "--user", ME, "--home", str(tmp_path))
    result = cli(*args, obj=_deps(manager))
    assert result.exit_code == 1
    assert result.stdout == ""  # nothing to save as a unit
    message = " ".join(result.stderr.split())
    assert "the interpreter /tmp/venv/bin/python is under /tmp or /var/tmp" in message
    assert "PrivateTmp=yes" in message and "203/EXEC" in message
    assert "/opt/familiar/bin/familiar service role-unit agent" in message


def test_a_role_unit_for_a_missing_account_is_refused(shm: Path, tmp_path: Path) -> None:
    manager = ServiceManager(python=str(_interpreter(shm / "bin")), code_root=_code(shm / "src"))
    args = ("service", "role-unit", "scheduler", "--user", "no-such-familiar-user")
    result = cli(*args, "--home", str(tmp_path), obj=_deps(manager))
    assert result.exit_code == 1 and result.stdout == ""
    assert "useradd" in result.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to check for another account")
def test_a_role_unit_its_account_cannot_run_is_refused(shm: Path, tmp_path: Path) -> None:
    private = shm / "root-only"
    python = _interpreter(private / "bin")
    private.chmod(0o700)
    manager = ServiceManager(python=str(python), code_root=_code(shm / "src"))
    args = ("service", "role-unit", "channels", "--user", "nobody", "--home", str(tmp_path))
    result = cli(*args, obj=_deps(manager))
    assert result.exit_code == 1 and result.stdout == ""
    assert f"user nobody cannot enter {private} (mode 0700" in " ".join(result.stderr.split())


def test_an_unknown_role_is_refused(tmp_path: Path) -> None:
    result = cli("service", "role-unit", "janitor", "--home", str(tmp_path))
    assert result.exit_code == 1 and "unknown role 'janitor'" in result.stderr
