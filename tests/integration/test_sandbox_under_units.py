"""``exec`` under the systemd units familiar writes: each command in the exec unit.

No systemd runs here. `tests.unitsim.activate` plays the socket unit (``Accept=yes``):
for every connection it starts an instance of the rendered ``familiar-exec@.service``
through `tests.unitsim.run` (the unit's mount namespace, ``PrivateUsers=``,
``PrivateNetwork=``, the service user's ids, no_new_privs and the seccomp filters of
``SystemCallFilter=``, ``RestrictNamespaces=`` and the rest), with the connection as fd 3,
in a cgroup of its own that is killed when the instance ends. The gateway side is
`tests.unitsim.probe` under the rendered daemon unit, again through `tests.unitsim.run`:
familiar's own `ExecRunner` finds ``FAMILIAR_EXEC_SOCKET`` in the unit's environment and
sends the command. A directive the simulation does not model stops it, so a new one in
a template cannot slip past. The controls take one protection out of the rendered
units; each time the same checks see what they must not.
"""

from __future__ import annotations

import contextlib
import ctypes.util
import json
import os
import pwd
import queue
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from gateway.service import CODE_ROOT, UnitKind, exec_start_for, render_unit
from gateway.service_exec import (
    EXEC_SERVICE_NAME,
    EXEC_SOCKET_NAME,
    ExecUnitSettings,
    render_exec_units,
)
from tests.unitsim.activate import cgroup2_root

pytestmark = pytest.mark.slow  # each case starts Pythons importing core (seconds each)

ROOT = Path(__file__).resolve().parents[2]
USER = "nobody"
DAEMON_GROUP = "daemon"
CONFIG_SECRET = "sk-in-config-canary"
ENV_SECRET = "sk-env-canary"
PROBE = (
    'echo "key=${FAMILIAR_PROVIDER__API_KEY:-absent}"; '
    'cat "{home}/config.toml" 2>/dev/null || echo "config=hidden"; '
    'echo "home=$(ls -A "{home}" 2>/dev/null | tr "\\n" " ")"; '
    'echo "environ=$(tr "\\0" "\\n" < /proc/$PPID/environ | grep -c canary)"; '
    'echo "any_environ=$(cat /proc/[0-9]*/environ 2>/dev/null | tr "\\0" "\\n" | grep -c canary)"; '
    'touch written && echo "workspace=writable"; '
    'touch memory/note.md 2>/dev/null || echo "memory=read-only"; '
    'touch /usr/unitsim 2>/dev/null || echo "system=read-only"; '
    'echo "net=$(grep -c : /proc/net/dev)"'
)


def _requirements() -> str | None:
    if os.geteuid() != 0:
        return "needs root (mount namespaces, cgroups, then the service user's ids)"
    if shutil.which("systemd-analyze") is None:
        return "systemd-analyze is not installed (`make deps-system`)"
    if ctypes.util.find_library("seccomp") is None:
        return "libseccomp is not installed (`make deps-system`)"
    if cgroup2_root() is None:
        return "no writable cgroup v2 hierarchy (the exec instances' cgroups)"
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
        (path / "workspace" / "memory").mkdir(parents=True)
        (path / "config.toml").write_text(f'[provider]\napi_key = "{CONFIG_SECRET}"\n')
        for item in (path, path / "workspace", path / "workspace" / "memory", path / "config.toml"):
            os.chown(item, account.pw_uid, account.pw_gid)
        path.chmod(0o700)
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def socket_path() -> Iterator[str]:
    """Outside /tmp too: the daemon's unit must reach it."""
    directory = Path("/run") / f"unitsim-{secrets.token_hex(4)}"
    yield str(directory / "exec.sock")
    shutil.rmtree(directory, ignore_errors=True)


Change = Callable[[str], str]


def _same(text: str) -> str:
    return text


class Units:
    """The rendered daemon unit and exec units, written to a directory."""

    def __init__(
        self,
        home: Path,
        directory: Path,
        socket: str,
        *,
        network: bool = True,
        kind: UnitKind = "system",
    ) -> None:
        self.home, self.directory, self.kind = home, directory, kind
        start = exec_start_for(home)
        user, group = (USER, DAEMON_GROUP) if kind == "system" else (None, None)
        self.daemon = render_unit(
            kind, exec_start=start, home=home, user=user, group=group, exec_socket=socket
        )
        settings = ExecUnitSettings(
            home=home,
            workspace=home / "workspace",
            python=sys.executable,
            code_root=CODE_ROOT,
            network=network,
            socket=socket,
        )
        self.exec = render_exec_units(kind, settings, user=user, group=group)

    def write(self, *, daemon: Change = _same, service: Change = _same) -> dict[str, Path]:
        texts = {
            "familiar.service": daemon(self.daemon),
            EXEC_SOCKET_NAME: self.exec[EXEC_SOCKET_NAME],
            EXEC_SERVICE_NAME: service(self.exec[EXEC_SERVICE_NAME]),
        }
        paths = {"kind": Path(self.kind)}
        for name, text in texts.items():
            paths[name] = self.directory / name
            paths[name].write_text(text)
        return paths


class Activation:
    """`tests.unitsim.activate` running in the background; its lines in a queue."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc
        self.lines: queue.Queue[str] = queue.Queue()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.strip())

    def expect(self, wanted: str) -> None:
        while True:
            try:
                line = self.lines.get(timeout=60)
            except queue.Empty:
                raise AssertionError(f"unitsim.activate never said {wanted!r}") from None
            if line == wanted:
                return


@contextlib.contextmanager
def activation(paths: dict[str, Path], *, cgroup_kill: bool = True) -> Iterator[Activation]:
    argv = [sys.executable, "-m", "tests.unitsim.activate"]
    argv += ["--socket", str(paths[EXEC_SOCKET_NAME]), "--service", str(paths[EXEC_SERVICE_NAME])]
    argv += ["--kind", str(paths["kind"]), "--user", USER]
    if str(paths["kind"]) == "user":  # a user's own interpreter is in reach of the user
        argv += ["--reach", str(Path(sys.executable).resolve())]
    argv += [] if cgroup_kill else ["--no-cgroup-kill"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, cwd=ROOT)
    act = Activation(proc)
    try:
        act.expect("listening")
        yield act
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
        act.reader.join(timeout=60)
        assert proc.stdout is not None
        proc.stdout.close()


def _gateway_exec(
    paths: dict[str, Path],
    home: Path,
    command: str,
    *,
    network: bool = True,
    timeout: float = 20,
) -> dict[str, Any]:
    """Run ``command`` through familiar's exec, from a process under the daemon's unit."""
    config = json.dumps({"sandbox": "auto", "network": network})
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "PYTHONPATH": str(ROOT),
        "FAMILIAR_PROVIDER__API_KEY": ENV_SECRET,
        "INVOCATION_ID": "0123456789abcdef",  # systemd sets it for every service
    }
    argv = [
        *(sys.executable, "-m", "tests.unitsim.run", "--unit", str(paths["familiar.service"])),
        *("--kind", str(paths["kind"]), "--user", USER),
        *("--reach", str(Path(sys.executable).resolve())),
        *("--", sys.executable, "-m", "tests.unitsim.probe", config, str(home / "workspace")),
        *(command.replace("{home}", str(home)), str(timeout)),
    ]
    done = subprocess.run(
        argv, capture_output=True, text=True, env=env, cwd=ROOT, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    found: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


def _confined(found: dict[str, Any]) -> str:
    assert found["choice"] == {"name": "systemd", "mode": "auto", "problem": ""}
    output: str = found["result"]
    assert output.startswith("exit code 0\n"), output
    assert "key=absent" in output
    assert "config=hidden" in output and CONFIG_SECRET not in output
    assert "home=workspace \n" in output  # nothing else of FAMILIAR_HOME
    assert "environ=0" in output and "any_environ=0" in output and ENV_SECRET not in output
    assert "workspace=writable" in output and "system=read-only" in output
    assert "memory=read-only" in output  # global memory: through the agent's tools only
    return output


@pytest.mark.parametrize("kind", ["system", "user"])
def test_exec_runs_confined_in_the_exec_unit(
    home: Path, tmp_path: Path, socket_path: str, kind: UnitKind
) -> None:
    paths = Units(home, tmp_path, socket_path, kind=kind).write()
    with activation(paths) as act:
        output = _confined(_gateway_exec(paths, home, PROBE))
        act.expect("stopped 1")
    assert re.search(r"net=[2-9]", output), output  # the host's interfaces: network on
    assert (home / "workspace" / "written").exists()


@pytest.mark.parametrize("kind", ["system", "user"])
def test_network_off_isolates_the_command(
    home: Path, tmp_path: Path, socket_path: str, kind: UnitKind
) -> None:
    paths = Units(home, tmp_path, socket_path, network=False, kind=kind).write()
    with activation(paths):
        found = _gateway_exec(paths, home, PROBE, network=False)
    assert "net=1" in _confined(found)  # /proc/net/dev: the loopback alone


def _survivors(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if marker in (entry / "cmdline").read_bytes().decode(errors="replace"):
                    found.append(int(entry.name))
    return found


def _timeout_run(paths: dict[str, Path], home: Path, *, cgroup_kill: bool) -> list[int]:
    """A command that leaves a ``setsid`` child behind and runs out of time; the pids
    of that child still alive once the instance stopped."""
    marker = f"3007.{secrets.randbelow(10**6):06d}"
    command = f"setsid sleep {marker} > /dev/null 2>&1 & echo started; sleep 600"
    with activation(paths, cgroup_kill=cgroup_kill) as act:
        found = _gateway_exec(paths, home, command, timeout=3)
        act.expect("stopped 1")
        result = found["result"]
        assert result.startswith("failed: command timed out after 3s"), result
        assert "started" in result
        return _survivors(marker)


@pytest.mark.parametrize("kind", ["system", "user"])
def test_a_setsid_child_does_not_outlive_the_timeout(
    home: Path, tmp_path: Path, socket_path: str, kind: UnitKind
) -> None:
    paths = Units(home, tmp_path, socket_path, kind=kind).write()
    assert _timeout_run(paths, home, cgroup_kill=True) == []


def test_control_without_the_cgroup_kill_the_child_survives(
    home: Path, tmp_path: Path, socket_path: str
) -> None:
    paths = Units(home, tmp_path, socket_path).write()
    survivors = _timeout_run(paths, home, cgroup_kill=False)
    for pid in survivors:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    assert survivors


def _drop(prefix: str) -> Change:
    def change(text: str) -> str:
        changed, count = re.subn(rf"(?m)^{re.escape(prefix)}.*\n", "", text)
        assert count >= 1, prefix
        return changed

    return change


def _set(directive: str, value: str) -> Change:
    def change(text: str) -> str:
        changed, count = re.subn(rf"(?m)^{directive}=.*$", f"{directive}={value}", text)
        assert count == 1, directive
        return changed

    return change


def _one_user_namespace_and_group(text: str) -> str:
    return _set("Group", DAEMON_GROUP)(_drop("PrivateUsers=")(text))


@pytest.mark.parametrize(
    ("daemon", "service", "leak"),
    [
        (_same, _drop("TemporaryFileSystem="), CONFIG_SECRET),
        (_drop("PrivateUsers="), _one_user_namespace_and_group, "any_environ=1"),
    ],
    ids=["no-TemporaryFileSystem", "one-user-namespace-and-group"],
)
def test_controls_without_a_protection_the_command_sees_secrets(
    home: Path, tmp_path: Path, socket_path: str, daemon: Change, service: Change, leak: str
) -> None:
    paths = Units(home, tmp_path, socket_path).write(daemon=daemon, service=service)
    with activation(paths):
        found = _gateway_exec(paths, home, PROBE)
    assert leak in found["result"], found["result"]


def test_the_strict_daemon_unit_stops_bubblewrap(home: Path, tmp_path: Path) -> None:
    """Why the exec unit exists: bwrap cannot run under the daemon's unit any more."""
    if shutil.which("bwrap") is None:
        pytest.skip("bwrap is not installed (`make deps-system`)")
    paths = Units(home, tmp_path, "/run/unitsim-none/exec.sock").write()
    config = json.dumps({"sandbox": "bwrap"})
    argv = [
        *(sys.executable, "-m", "tests.unitsim.run", "--unit", str(paths["familiar.service"])),
        *("--kind", "system", "--user", USER, "--reach", str(Path(sys.executable).resolve())),
        *("--", sys.executable, "-m", "tests.unitsim.probe", config, str(home / "workspace")),
        "true",
    ]
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(ROOT), "INVOCATION_ID": "1"}
    done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    found = json.loads(done.stdout.strip().splitlines()[-1])
    problem = found["choice"]["problem"]
    assert found["choice"]["name"] is None and "bubblewrap does not work" in problem
    assert "commands run in the exec unit" in problem  # what to do instead


def test_a_directive_the_simulation_does_not_model_stops_it(home: Path, tmp_path: Path) -> None:
    paths = Units(home, tmp_path, "/run/unitsim-none/exec.sock").write(
        service=lambda text: text.replace("[Service]\n", "[Service]\nBindPaths=/srv\nNice=5\n")
    )
    argv = [sys.executable, "-m", "tests.unitsim.run", "--unit", str(paths[EXEC_SERVICE_NAME])]
    done = subprocess.run(
        [*argv, "--kind", "system", "--user", USER, "--", "/bin/true"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=30,
        check=False,
    )
    assert done.returncode != 0 and "Nice" in done.stderr


_NESTED = (
    "python3 -c \"import socket; s = socket.socket(socket.AF_UNIX); s.connect('{socket}'); "
    "print('nested=connected')\" 2>/dev/null || echo nested=refused"
)
"""From inside the exec unit, a connection to the exec socket: each would start an
instance with limits of its own (``MemoryMax=``, ``TasksMax=``) in a cgroup of its own,
and enough of them fill ``MaxConnections=`` for every session."""


@pytest.mark.parametrize("kind", ["system", "user"])
def test_a_command_cannot_reach_the_exec_socket(
    home: Path, tmp_path: Path, socket_path: str, kind: UnitKind
) -> None:
    paths = Units(home, tmp_path, socket_path, kind=kind).write()
    with activation(paths):
        found = _gateway_exec(paths, home, _NESTED.replace("{socket}", socket_path))
    assert found["result"] == "exit code 0\nnested=refused\n", found["result"]
