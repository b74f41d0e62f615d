"""A fork server for the role processes: they share the supervisor's imported code.

Every role is a whole Python interpreter. Started with ``python -m gateway.daemon``,
each one imports familiar again (~0.5-1 s of CPU, ~70 MiB of private memory). Forked
from a process that already imported it, a role is ready in a fraction of that and
shares those pages with every other role (copy-on-write; ``gc.freeze()`` keeps the
collector from writing to the shared objects).

The supervisor runs an event loop and threads, which must not be forked. So it forks
the zygote first, while it is still single-threaded and has imported the daemon; the
zygote forks a role per request. Each role is forked twice (zygote -> intermediate ->
role) and the intermediate exits at once, so the role is re-parented to the supervisor
(a child subreaper, see `gateway.reaper`), which waits for it, signals it and reaps it
as if it had started it itself.

Protocol over a socket pair, one JSON line each way per request: ``{"argv": [...],
"env": {...}}`` -> ``{"pid": N}`` or ``{"error": "..."}``. The zygote exits when the
supervisor closes its end (or dies).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import gc
import json
import logging
import os
import signal
import socket
import sys
import traceback
from collections.abc import Callable, Mapping, Sequence

__all__ = ["Zygote", "ZygoteGone"]

log = logging.getLogger(__name__)

_PR_SET_NAME = 15


class ZygoteGone(OSError):
    """The zygote did not answer (it died): start the role another way."""


class Zygote:
    """The supervisor's handle on its fork server.

    Args:
        sock: the supervisor's end of the socket pair.
        pid: the zygote's process id (a child of the supervisor).
    """

    def __init__(self, sock: socket.socket, pid: int) -> None:
        self.sock = sock
        self.pid = pid
        self._lock = asyncio.Lock()
        self._buffer = b""
        self._broken = False
        """A request was cut off: its answer may still come, so no other is asked."""

    @classmethod
    def fork(
        cls, role_main: Callable[[list[str]], None], *, close_fds: Sequence[int] = ()
    ) -> Zygote:
        """Fork the zygote; call while this process is still single-threaded.

        Args:
            role_main: what a forked role runs with its argv (``gateway.daemon.main``);
                it exits the process (``sys.exit``) when the role ends.
            close_fds: descriptors of this process the zygote and the roles must not hold.
        """
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        gc.collect()
        gc.freeze()  # the objects imported so far are never scanned, so never written
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        pid = os.fork()
        if pid == 0:  # the zygote
            code = 1
            try:
                ours.close()
                for fd in close_fds:
                    os.close(fd)
                code = _serve(theirs, role_main)
            finally:
                os._exit(code)
        theirs.close()
        ours.setblocking(False)
        log.info("zygote started pid=%d", pid)
        return cls(ours, pid)

    async def spawn(self, argv: Sequence[str], env: Mapping[str, str]) -> int:
        """Fork a role running ``role_main(argv)`` with ``env``; return its pid.

        Raises:
            ZygoteGone: the zygote is not there to answer.
            OSError: the fork failed.
        """
        loop = asyncio.get_running_loop()
        request = json.dumps({"argv": list(argv), "env": dict(env)}).encode() + b"\n"
        async with self._lock:  # one request at a time: answers come back in order
            if self._broken:
                raise ZygoteGone("an earlier request to the zygote was cut off")
            try:
                await loop.sock_sendall(self.sock, request)
                while b"\n" not in self._buffer:
                    chunk = await loop.sock_recv(self.sock, 4096)
                    if not chunk:
                        raise ZygoteGone("the zygote closed its socket")
                    self._buffer += chunk
            except (BrokenPipeError, ConnectionResetError) as exc:
                raise ZygoteGone(f"the zygote is gone: {exc}") from exc
            except BaseException:  # cancelled mid-request: a later answer would be misread
                self._broken = True
                raise
            line, _, self._buffer = self._buffer.partition(b"\n")
        answer = json.loads(line)
        if "pid" not in answer:
            raise OSError(answer.get("error", "the zygote could not fork"))
        return int(answer["pid"])

    def close(self) -> None:
        """Close our end: the zygote exits (the roles it forked keep running)."""
        with contextlib.suppress(OSError):
            self.sock.close()


# -- the zygote's side -----------------------------------------------------------------------


def _serve(sock: socket.socket, role_main: Callable[[list[str]], None]) -> int:
    """Answer fork requests until the supervisor closes the socket."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's Ctrl-C is the supervisor's
    reader = sock.makefile("rb")
    while True:
        line = reader.readline()
        if not line:
            return 0
        answer: dict[str, object]
        try:
            request = json.loads(line)
            answer = {"pid": _fork_role(sock, request["argv"], request["env"], role_main)}
        except Exception as exc:  # every failure is the requester's answer
            answer = {"error": f"cannot fork a role: {exc}"}
        sock.sendall(json.dumps(answer).encode() + b"\n")


def _fork_role(
    sock: socket.socket,
    argv: list[str],
    env: dict[str, str],
    role_main: Callable[[list[str]], None],
) -> int:
    """Fork twice: the role's parent (the intermediate) exits, re-parenting it."""
    read_end, write_end = os.pipe()
    # What the zygote allocated since the supervisor's freeze (requests, answers): the
    # role's collector leaves it alone too, so never writes to pages it shares.
    gc.freeze()
    middle = os.fork()
    if middle == 0:  # the intermediate
        code = 1
        try:
            os.close(read_end)
            role = os.fork()
            if role == 0:
                os.close(write_end)
                _become_role(sock, argv, env, role_main)  # never returns
            os.write(write_end, str(role).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write_end)
    try:
        os.waitpid(middle, 0)
        with os.fdopen(read_end, "rb") as pipe:
            written = pipe.read()
    finally:
        with contextlib.suppress(OSError):
            os.close(read_end)
    if not written:
        raise OSError("the second fork failed")
    return int(written)


def _become_role(
    sock: socket.socket,
    argv: list[str],
    env: dict[str, str],
    role_main: Callable[[list[str]], None],
) -> None:
    code: int = 1
    try:
        # detach, then close: the zygote's reader (makefile) would keep the fd open.
        os.close(sock.detach())
        os.setsid()  # like start_new_session: a terminal's Ctrl-C reaches the supervisor only
        # The dispositions a new interpreter starts with.
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGPIPE, signal.SIG_IGN)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)
        os.environ.clear()
        os.environ.update(env)
        sys.argv = ["gateway.daemon", *argv]
        _name_process(argv)
        try:
            role_main(list(argv))
            code = 0
        except SystemExit as exc:
            code = _exit_status(exc.code)
    except BaseException:  # a role's crash is reported like an interpreter's
        traceback.print_exc()
        code = 1
    finally:
        with contextlib.suppress(Exception):
            logging.shutdown()
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def _name_process(argv: list[str]) -> None:
    """``familiar-agent`` etc. in ``top`` and ``ps -e`` (the command line stays the
    supervisor's: a fork cannot change it)."""
    role = argv[argv.index("--role") + 1] if "--role" in argv[:-1] else "role"
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).prctl(_PR_SET_NAME, f"familiar-{role}".encode()[:15], 0, 0, 0)


def _exit_status(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1
