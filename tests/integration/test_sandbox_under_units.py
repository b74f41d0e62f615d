"""``exec``'s bubblewrap sandbox works under the systemd units familiar writes.

No systemd runs here: `tests.unitsim.run` builds what systemd 252 builds for each
rendered unit (system, user and the three role units) — the mount namespace of its
sandboxing directives, ``PrivateUsers=``, the service user's ids, no_new_privs and the
seccomp filters of ``SystemCallFilter=`` (groups expanded by ``systemd-analyze
syscall-filter``), ``RestrictNamespaces=`` (``clone3`` made ENOSYS as systemd does),
``RestrictAddressFamilies=`` and the rest — and then runs a real ``exec`` through
familiar's `ExecRunner` as that user. A directive the simulation does not model stops
it, so a new one in a template cannot slip past. The controls put back what the units
had before (``RestrictNamespaces=yes``), or drop one thing bubblewrap needs: each
time the probe falls back to the host and the same checks see the secrets.
"""

from __future__ import annotations

import ctypes.util
import json
import os
import pwd
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from gateway.service import exec_start_for, render_role_unit, render_unit

pytestmark = pytest.mark.slow  # each case starts a Python importing core (seconds each)

ROOT = Path(__file__).resolve().parents[2]
USER = "nobody"
CONFIG_SECRET = "sk-in-config-canary"
ENV_SECRET = "sk-env-canary"
PROBE = (
    'echo "key=${FAMILIAR_PROVIDER__API_KEY:-absent}"; '
    'cat "{home}/config.toml" 2>/dev/null || echo "config=hidden"; '
    'echo "environ=$(tr "\\0" "\\n" < /proc/$PPID/environ | grep -c canary)"; '
    'echo "net=$(grep -c : /proc/net/dev)"'
)


def _requirements() -> str | None:
    if os.geteuid() != 0:
        return "needs root (mount namespaces, then the service user's ids)"
    for tool in ("bwrap", "systemd-analyze", "runuser"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (`make deps-system`)"
    if ctypes.util.find_library("seccomp") is None:
        return "libseccomp is not installed (`make deps-system`)"
    return None


@pytest.fixture(scope="module", autouse=True)
def _needs() -> None:
    problem = _requirements()
    if problem is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(problem + "; CI=true requires it")
        pytest.skip(problem)


@pytest.fixture
def home() -> Iterator[Path]:
    """A FAMILIAR_HOME outside /tmp (PrivateTmp= hides /tmp), owned by the service user."""
    path = Path(tempfile.mkdtemp(prefix="familiar-unitsim-", dir="/var/lib"))
    account = pwd.getpwnam(USER)
    try:
        (path / "workspace").mkdir()
        (path / "config.toml").write_text(f'[provider]\napi_key = "{CONFIG_SECRET}"\n')
        for item in (path, path / "workspace", path / "config.toml"):
            os.chown(item, account.pw_uid, account.pw_gid)
        path.chmod(0o700)
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _units(home: Path) -> dict[str, tuple[str, str]]:
    """name -> (kind, text) for every unit familiar renders."""
    start = exec_start_for(home)
    units = {
        "system": ("system", render_unit("system", exec_start=start, home=home, user=USER)),
        "user": ("user", render_unit("user", exec_start=start, home=home, user=None)),
    }
    for role in ("agent", "channels", "scheduler"):
        units[f"role-{role}"] = ("system", render_role_unit(role, home=home, user=USER))
    return units


def _run_under(
    unit: str, kind: str, home: Path, tmp_path: Path, *, network: bool = True
) -> dict[str, Any]:
    path = tmp_path / "unit.service"
    path.write_text(unit)
    config = json.dumps({"sandbox": "auto", "network": network})
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "PYTHONPATH": str(ROOT),
        "FAMILIAR_PROVIDER__API_KEY": ENV_SECRET,
        "INVOCATION_ID": "0123456789abcdef",  # systemd sets it for every service
    }
    argv = [
        *(sys.executable, "-m", "tests.unitsim.run", "--unit", str(path)),
        *("--kind", kind, "--user", USER, "--reach", str(Path(sys.executable).resolve()), "--"),
        *(sys.executable, "-m", "tests.unitsim.probe", config, str(home / "workspace")),
        PROBE.replace("{home}", str(home)),
    ]
    done = subprocess.run(
        argv, capture_output=True, text=True, env=env, cwd=ROOT, timeout=90, check=False
    )
    assert done.returncode == 0, done.stderr
    found: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


def _sandboxed(found: dict[str, Any], *, network: bool = True) -> None:
    assert found["choice"] == {"name": "bwrap", "mode": "auto", "problem": ""}
    output = found["result"]
    assert output.startswith("exit code 0\n"), output
    assert "key=absent" in output
    assert "config=hidden" in output and CONFIG_SECRET not in output
    assert "environ=0" in output and ENV_SECRET not in output
    if not network:  # /proc/net/dev lists each interface on a line with a colon: lo only
        assert "net=1" in output, output


@pytest.mark.parametrize(
    "name", ["system", "user", "role-agent", "role-channels", "role-scheduler"]
)
def test_exec_is_sandboxed_under_each_rendered_unit(home: Path, tmp_path: Path, name: str) -> None:
    kind, text = _units(home)[name]
    _sandboxed(_run_under(text, kind, home, tmp_path))


def test_network_off_works_under_the_system_unit(home: Path, tmp_path: Path) -> None:
    kind, text = _units(home)["system"]
    _sandboxed(_run_under(text, kind, home, tmp_path, network=False), network=False)


def _set(directive: str, value: str) -> Callable[[str], str]:
    def change(text: str) -> str:
        changed, count = re.subn(rf"(?m)^{directive}=.*$", f"{directive}={value}", text)
        assert count == 1
        return changed

    return change


def _drop_line(line: str) -> Callable[[str], str]:
    def change(text: str) -> str:
        assert f"\n{line}\n" in text
        return text.replace(f"\n{line}\n", "\n")

    return change


def _add_after_exec_start(line: str) -> Callable[[str], str]:
    def change(text: str) -> str:
        return re.sub(r"(?m)^(ExecStart=.*)$", rf"\1\n{line}", text, count=1)

    return change


@pytest.mark.parametrize(
    ("change", "blocked_by"),
    [
        (_set("RestrictNamespaces", "yes"), "namespaces"),  # the units before issue 22
        (_add_after_exec_start("ProtectKernelTunables=yes"), "proc"),
        (_add_after_exec_start("ProtectKernelLogs=yes"), "proc"),
        (_drop_line("SystemCallFilter=@mount capset"), "SystemCallFilter"),
    ],
    ids=["RestrictNamespaces=yes", "ProtectKernelTunables", "ProtectKernelLogs", "no-@mount"],
)
def test_controls_without_what_bwrap_needs_exec_falls_back_and_leaks(
    home: Path, tmp_path: Path, change: Callable[[str], str], blocked_by: str
) -> None:
    kind, text = _units(home)["system"]
    found = _run_under(change(text), kind, home, tmp_path)
    assert found["choice"]["name"] == "none"
    problem = found["choice"]["problem"]
    assert "under systemd" in problem and blocked_by in problem
    output = found["result"]
    assert CONFIG_SECRET in output and "environ=1" in output


def test_a_directive_the_simulation_does_not_model_stops_it(home: Path, tmp_path: Path) -> None:
    kind, text = _units(home)["system"]
    path = tmp_path / "unit.service"
    path.write_text(_add_after_exec_start("BindPaths=/srv")(text))
    argv = [sys.executable, "-m", "tests.unitsim.run", "--unit", str(path), "--kind", kind]
    done = subprocess.run(
        [*argv, "--user", USER, "--", "/bin/true"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=30,
        check=False,
    )
    assert done.returncode != 0 and "BindPaths" in done.stderr
