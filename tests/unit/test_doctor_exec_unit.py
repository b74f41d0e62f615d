"""``familiar doctor`` and ``status`` name the exec unit when the gateway runs under the units."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from core.tools.sandbox import EXEC_SOCKET_ENV
from tests.unit.test_cli_client import ControlStack, _write_config, cli
from tests.unit.test_cli_client import daemon as daemon
from tests.unit.test_cli_client import home as home
from tests.unit.test_cli_client import loop_thread as loop_thread


def _config(home: Path) -> None:
    _write_config(home, '[provider]\nkind = "scripted"\n\n[tools.exec]\nnetwork = false\n')
    (home / "workspace").mkdir(exist_ok=True)


def test_doctor_reports_the_exec_unit(
    daemon: ControlStack, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _config(home)
    path = home / "exec.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listening:
        listening.bind(str(path))
        listening.listen()
        monkeypatch.setenv(EXEC_SOCKET_ENV, str(path))
        result = cli("doctor", "--home", str(home))
        status = cli("status", "--home", str(home))
    assert result.exit_code == 0, result.stdout
    assert "✓ exec sandbox: systemd exec unit (familiar-exec.socket), network off" in result.stdout
    assert "exec sandbox in the gateway: systemd exec unit" in result.stdout
    assert "exec sandbox  systemd exec unit, network" in status.stdout


def test_doctor_fails_when_the_exec_socket_is_missing(
    daemon: ControlStack, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _config(home)
    missing = home / "no-such.sock"
    monkeypatch.setenv(EXEC_SOCKET_ENV, str(missing))
    result = cli("doctor", "--home", str(home))
    assert result.exit_code != 0
    assert f"✗ exec sandbox: systemd exec unit: the exec unit's socket {missing} is missing" in (
        result.stdout
    )
    assert "familiar-exec.socket" in result.stdout
    assert not os.path.exists(missing)
