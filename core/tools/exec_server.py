"""One ``exec`` command inside ``familiar-exec@.service``, and the protocol it speaks.

``familiar service install`` renders a socket unit (``familiar-exec.socket``,
``Accept=yes``) and this template service beside the daemon's unit. systemd starts one
instance per connection, sandboxed by the unit's own directives, and hands it the
connection as file descriptor 3 (``LISTEN_FDS=1``). The daemon (`core.tools.exec_client`)
sends one request; this program runs it with ``/bin/sh -c`` and streams the output back,
then the exit status. When the command times out or the daemon hangs up (the call was
cancelled) the shell's process group is killed and the program exits; systemd then kills
whatever is left in the instance's cgroup (``KillMode=control-group``), so a ``setsid``
child does not survive either.

Standard library only, and run as a script (``python -I .../exec_server.py``): the
instance starts for every command, so it must not import the gateway.

Frames: one byte of kind, four bytes of big-endian length, the payload.
``Q`` request (JSON: ``command``, ``cwd``, ``timeout``, ``env``, ``network``), ``O``
output bytes, ``X`` exit (JSON ``{"code": N}``, negative: killed by signal N), ``T``
timed out (JSON ``{"after": seconds}``), ``E`` refused or failed (UTF-8 text).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import selectors
import signal
import socket
import struct
import subprocess
import sys
import time
from typing import Any

__all__ = [
    "HEADER",
    "KINDS",
    "MAX_REQUEST",
    "check_request",
    "encode",
    "main",
]

HEADER = struct.Struct(">cI")
KINDS = frozenset({b"Q", b"O", b"X", b"T", b"E"})
MAX_REQUEST = 1 << 20
"""Bytes a request may have (the command line, its environment)."""
_CHUNK = 64 * 1024
_DRAIN = 1.0
"""Seconds to wait for buffered output once the shell exited."""
_REQUEST_WAIT = 30.0
_LISTEN_FD = 3


def encode(kind: bytes, payload: bytes) -> bytes:
    """One frame."""
    return HEADER.pack(kind, len(payload)) + payload


def check_request(
    request: Any, *, workspace: str, max_timeout: float, network: bool
) -> tuple[str, str, float, dict[str, str]]:
    """``(command, cwd, timeout, env)`` of a request this unit may run, else ValueError.

    The working directory must be the workspace or inside it (after resolving links),
    the timeout within the unit's, and the network setting the one the unit was
    rendered for (``PrivateNetwork=``): otherwise the daemon's configuration changed
    since ``familiar service install`` and the unit must be written again.
    """
    if not isinstance(request, dict):
        raise ValueError("the request is not a JSON object")
    command, cwd = request.get("command"), request.get("cwd")
    timeout, env = request.get("timeout"), request.get("env")
    if not isinstance(command, str) or not command:
        raise ValueError("the request has no command")
    if not isinstance(cwd, str) or not os.path.isabs(cwd):
        raise ValueError("the request's cwd is not an absolute path")
    if not isinstance(timeout, int | float) or not 0 < timeout <= max_timeout:
        raise ValueError(
            f"timeout {timeout!r} is outside what this unit allows (0 < timeout <= "
            f"{max_timeout:g}); run `familiar service install` again after changing "
            "tools.exec.max_timeout"
        )
    if not isinstance(env, dict) or not all(
        isinstance(k, str) and isinstance(v, str) and "=" not in k and "\0" not in k + v
        for k, v in env.items()
    ):
        raise ValueError("the request's env is not a map of names to strings")
    if request.get("network") is not network:
        state = "on" if network else "off"
        raise ValueError(
            f"this exec unit was rendered with the network {state}, but the gateway asks "
            f"for tools.exec.network = {str(not network).lower()}; run `familiar service "
            "install` again"
        )
    root = os.path.realpath(workspace)
    where = os.path.realpath(cwd)
    if where != root and not where.startswith(root.rstrip("/") + "/"):
        raise ValueError(f"cwd {cwd} is outside the workspace {workspace}")
    if not os.path.isdir(where):
        raise ValueError(f"cwd {cwd} is not a directory")
    return command, where, float(timeout), env


def _listen_socket() -> socket.socket:
    if os.environ.get("LISTEN_PID") != str(os.getpid()) or os.environ.get("LISTEN_FDS") != "1":
        raise SystemExit("exec_server: not started by socket activation (LISTEN_FDS=1)")
    for name in ("LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"):
        os.environ.pop(name, None)
    return socket.socket(fileno=_LISTEN_FD)


def _read_exact(conn: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        if not chunk:
            raise EOFError("the gateway hung up")
        data += chunk
    return data


def _read_request(conn: socket.socket) -> Any:
    conn.settimeout(_REQUEST_WAIT)
    kind, size = HEADER.unpack(_read_exact(conn, HEADER.size))
    if kind != b"Q" or size > MAX_REQUEST:
        raise ValueError("expected one request frame")
    request = json.loads(_read_exact(conn, size))
    conn.settimeout(None)
    return request


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _forward(conn: socket.socket, fd: int) -> bool:
    """Send what the pipe has; False at its end."""
    try:
        data = os.read(fd, _CHUNK)
    except BlockingIOError:
        return True
    if data:
        conn.sendall(encode(b"O", data))
    return bool(data)


def _run(conn: socket.socket, command: str, cwd: str, timeout: float, env: dict[str, str]) -> None:
    read_fd, write_fd = os.pipe()
    try:
        proc = subprocess.Popen(
            ["/bin/sh", "-c", command],
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=write_fd,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    finally:
        os.close(write_fd)
    os.set_blocking(read_fd, False)
    exited = os.pidfd_open(proc.pid)
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as sel:
        sel.register(read_fd, selectors.EVENT_READ, "out")
        sel.register(conn, selectors.EVENT_READ, "conn")
        sel.register(exited, selectors.EVENT_READ, "exit")
        drain_until: float | None = None
        while True:
            now = time.monotonic()
            if drain_until is None and now >= deadline:
                _kill_group(proc.pid)
                conn.sendall(encode(b"T", json.dumps({"after": timeout}).encode()))
                return
            limit = drain_until if drain_until is not None else deadline
            events = sel.select(max(0.0, limit - now))
            if not events and drain_until is not None:
                break
            for key, _ in events:
                if key.data == "out" and not _forward(conn, read_fd):
                    sel.unregister(read_fd)
                    if drain_until is not None:
                        drain_until = now
                elif key.data == "conn":
                    _kill_group(proc.pid)  # the gateway hung up: the call was cancelled
                    return
                elif key.data == "exit":
                    sel.unregister(exited)
                    proc.wait()
                    drain_until = now + _DRAIN
            if drain_until is not None and read_fd not in sel.get_map():
                break
    code = proc.returncode
    _kill_group(proc.pid)  # background children of the shell end with the command
    conn.sendall(encode(b"X", json.dumps({"code": code}).encode()))


def main(argv: list[str] | None = None) -> int:
    """Serve the one connection systemd handed over; the exit status is for the journal."""
    parser = argparse.ArgumentParser(prog="exec_server")
    parser.add_argument("--workspace", required=True)
    parser.add_argument("--max-timeout", type=float, required=True)
    parser.add_argument("--network", choices=("on", "off"), required=True)
    args = parser.parse_args(argv)
    conn = _listen_socket()
    try:
        request = _read_request(conn)
        command, cwd, timeout, env = check_request(
            request,
            workspace=args.workspace,
            max_timeout=args.max_timeout,
            network=args.network == "on",
        )
    except (ValueError, EOFError, OSError) as exc:
        with contextlib.suppress(OSError):
            conn.sendall(encode(b"E", str(exc).encode()))
        print(f"exec_server: request refused: {exc}", file=sys.stderr)
        return 1
    try:
        _run(conn, command, cwd, timeout, env)
    except OSError as exc:  # the gateway went away mid-stream, or /bin/sh cannot start
        with contextlib.suppress(OSError):
            conn.sendall(encode(b"E", f"cannot run the command: {exc}".encode()))
        print(f"exec_server: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
