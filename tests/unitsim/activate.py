"""Socket activation with ``Accept=yes`` as systemd 252 does it, without systemd.

``python -m tests.unitsim.activate --socket S.socket --service T@.service --kind K
--user NAME [--reach PATH]... [--no-cgroup-kill]``, as root. Listens on the socket's
``ListenStream=`` (owner ``SocketUser=``/``SocketGroup=``, ``SocketMode=``), prints
``listening`` and then, for every connection, starts an instance of the template: the
connection as file descriptor 3 (``LISTEN_FDS=1``) and `tests.unitsim.run` applying the
service's directives before it executes ``ExecStart=``. Each instance lives in a cgroup
of its own; when its main process exits the whole cgroup is killed (``KillMode=
control-group``, ``KillSignal=SIGKILL``) and ``stopped N`` is printed once it is empty.
``--no-cgroup-kill`` leaves the processes running (a negative control). SIGTERM stops
it, killing what is left.
"""

from __future__ import annotations

import argparse
import contextlib
import grp
import os
import pwd
import selectors
import signal
import socket
import sys
import time
from pathlib import Path

from tests.unitsim.unitfile import Directives, last, parse_section, words

_EMPTY_WAIT = 10.0


def cgroup2_root() -> Path | None:
    """Where a writable cgroup v2 hierarchy is mounted, if anywhere."""
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        left, _, right = line.partition(" - ")
        if right.split()[0] == "cgroup2" and "rw" in left.split()[5].split(","):
            return Path(left.split()[4])
    return None


def _listen(directives: Directives, owner: tuple[int, int] | None) -> socket.socket:
    """The listening socket; ``owner`` (uid, gid) for a user manager's socket."""
    path = last(directives, "ListenStream")
    if last(directives, "Accept") != "yes" or not path.startswith("/"):
        sys.exit("unitsim.activate: only Accept=yes on a ListenStream= path is modelled")
    Path(path).parent.mkdir(mode=int(last(directives, "DirectoryMode", "0755"), 8), exist_ok=True)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(path)
    user, group = last(directives, "SocketUser"), last(directives, "SocketGroup")
    uid, gid = owner or (0, 0)
    os.chown(
        path,
        pwd.getpwnam(user).pw_uid if user else uid,
        grp.getgrnam(group).gr_gid if group else gid,
    )
    os.chmod(path, int(last(directives, "SocketMode", "0666"), 8))
    sock.listen(int(last(directives, "Backlog", "128")))
    return sock


def _exec_start(service: Directives) -> list[str]:
    argv = words(last(service, "ExecStart").replace("$$", "$"))
    if not argv or not argv[0].startswith("/"):
        sys.exit("unitsim.activate: ExecStart= must be an absolute path")
    return argv


def _kill(cgroup: Path) -> None:
    """Kill every process of the instance and wait until the cgroup is empty."""
    (cgroup / "cgroup.kill").write_text("1")
    deadline = time.monotonic() + _EMPTY_WAIT
    while "populated 1" in (cgroup / "cgroup.events").read_text():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{cgroup} still has processes")
        time.sleep(0.01)
    cgroup.rmdir()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--socket", type=Path, required=True)
    parser.add_argument("--service", type=Path, required=True)
    parser.add_argument("--kind", choices=("system", "user"), required=True)
    parser.add_argument("--user", required=True)
    parser.add_argument("--reach", type=Path, action="append", default=[])
    parser.add_argument("--no-cgroup-kill", action="store_true")
    args = parser.parse_args()
    root = cgroup2_root()
    if root is None:
        sys.exit("unitsim.activate: no writable cgroup v2 hierarchy")
    account = pwd.getpwnam(args.user)
    owner = (account.pw_uid, account.pw_gid) if args.kind == "user" else None
    sock = _listen(parse_section(args.socket, "Socket"), owner)
    argv = _exec_start(parse_section(args.service, "Service"))
    run = [sys.executable, "-m", "tests.unitsim.run", "--unit", str(args.service)]
    run += ["--kind", args.kind, "--user", args.user, "--listen-fd"]
    run += [a for path in args.reach for a in ("--reach", str(path))]
    instances: dict[int, tuple[int, Path]] = {}  # pidfd -> (pid, cgroup)
    leftovers: list[Path] = []
    stop = False

    def terminate(_signum: int, _frame: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, terminate)
    sel = selectors.DefaultSelector()
    sel.register(sock, selectors.EVENT_READ)
    print("listening", flush=True)
    count = 0
    while not stop:
        for key, _ in sel.select(0.5):
            if key.fileobj is sock:
                conn, _addr = sock.accept()
                count += 1
                cgroup = root / f"unitsim-{os.getpid()}-{count}"
                cgroup.mkdir()
                pid = os.fork()
                if pid == 0:
                    (cgroup / "cgroup.procs").write_text("0")
                    os.dup2(conn.fileno(), 3)
                    os.execv(sys.executable, [*run, "--", *argv])
                conn.close()
                pidfd = os.pidfd_open(pid)
                instances[pidfd] = (pid, cgroup)
                sel.register(pidfd, selectors.EVENT_READ)
            else:
                pidfd = int(key.fd)
                pid, cgroup = instances.pop(pidfd)
                sel.unregister(pidfd)
                os.close(pidfd)
                os.waitpid(pid, 0)
                if args.no_cgroup_kill:
                    leftovers.append(cgroup)
                else:
                    _kill(cgroup)
                print(f"stopped {cgroup.name.rsplit('-', 1)[1]}", flush=True)
    for _pid, cgroup in instances.values():
        leftovers.append(cgroup)
    for cgroup in leftovers:
        with contextlib.suppress(OSError, TimeoutError):
            _kill(cgroup)
    with contextlib.suppress(OSError):
        os.unlink(last(parse_section(args.socket, "Socket"), "ListenStream"))


if __name__ == "__main__":
    main()
