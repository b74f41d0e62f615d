"""The supervisor's children: started by pid, waited for by one SIGCHLD handler.

The role processes are forked by the zygote (`gateway.zygote`) and re-parented to
the supervisor, which is a *child subreaper*: orphans below it come to it rather than
to init. So it reaps every child itself (``waitpid(-1)`` on SIGCHLD): a role's exit
status resolves that role's `ChildProcess.wait`; any other orphan (a process a role
started and left behind) is reaped so that no zombie stays.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import os
import signal
import time

__all__ = ["ChildProcess", "ChildReaper", "become_subreaper"]

log = logging.getLogger(__name__)

_PR_SET_CHILD_SUBREAPER = 36
_EARLY_EXIT_TTL = 60.0
"""How long the status of a child not (yet) watched is kept for a late `watch`."""


class ChildProcess:
    """A child of the supervisor, with the part of asyncio's Process API it uses."""

    def __init__(self, pid: int, exited: asyncio.Future[int]) -> None:
        self.pid = pid
        self._exited = exited

    @property
    def returncode(self) -> int | None:
        """The exit status (negative: the signal that killed it), None while running."""
        return self._exited.result() if self._exited.done() else None

    async def wait(self) -> int:
        return await asyncio.shield(self._exited)

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:  # a reaped pid may already belong to someone else
            os.kill(self.pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class ChildReaper:
    """Reaps this process's children and hands each watched one its exit status."""

    def __init__(self) -> None:
        self._watched: dict[int, asyncio.Future[int]] = {}
        self._unclaimed: dict[int, tuple[int, float]] = {}

    def start(self) -> None:
        """Reap on SIGCHLD (in the running loop), and reap what exited already."""
        asyncio.get_running_loop().add_signal_handler(signal.SIGCHLD, self.reap)
        self.reap()

    def stop(self) -> None:
        with contextlib.suppress(RuntimeError, ValueError):
            asyncio.get_running_loop().remove_signal_handler(signal.SIGCHLD)

    def watch(self, pid: int) -> ChildProcess:
        """The child ``pid`` (already started: its status may even be in already)."""
        exited: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        early = self._unclaimed.pop(pid, None)
        if early is not None:
            exited.set_result(early[0])
        else:
            self._watched[pid] = exited
        return ChildProcess(pid, exited)

    def reap(self) -> None:
        """Collect every child that exited."""
        now = time.monotonic()
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            code = os.waitstatus_to_exitcode(status)
            exited = self._watched.pop(pid, None)
            if exited is not None:
                if not exited.done():
                    exited.set_result(code)
            else:
                # A role that died before its pid came back from the zygote, or an orphan.
                self._unclaimed[pid] = (code, now)
                log.debug("reaped pid=%d status=%d", pid, code)
        for pid, (_code, at) in list(self._unclaimed.items()):
            if now - at > _EARLY_EXIT_TTL:
                del self._unclaimed[pid]


def become_subreaper() -> bool:
    """Make orphans below this process its children (Linux ``PR_SET_CHILD_SUBREAPER``)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    except (OSError, AttributeError) as exc:
        log.warning("cannot become a child subreaper (%s): roles start without the zygote", exc)
        return False
    return True
