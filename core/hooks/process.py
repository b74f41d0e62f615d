"""Runs one hook command: payload on stdin, capped stdout/stderr, a timeout that kills
the command's whole process group, and the allow-listed environment of ``exec``."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import signal
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["HookRun", "run_hook_process"]

_DRAIN = 2.0
"""Seconds to read what a killed hook's pipes still hold (a child that escaped its
process group may keep them open)."""


@dataclass(frozen=True, slots=True)
class HookRun:
    """What a hook process did. ``failure`` is set when it did not finish properly."""

    exit_code: int | None
    stdout: bytes = b""
    stderr: bytes = b""
    failure: str | None = None
    timed_out: bool = False


@dataclass(slots=True)
class _Capped:
    """Reads a pipe to its end, keeping at most ``limit`` bytes; past that it calls
    ``overflow`` once (which kills the hook) and discards the rest."""

    limit: int
    overflow: Callable[[], None]
    data: bytearray = field(default_factory=bytearray)
    over: bool = False

    async def read(self, stream: asyncio.StreamReader | None) -> None:
        if stream is None:
            return
        while chunk := await stream.read(65536):
            if self.over:
                continue
            self.data += chunk
            if len(self.data) > self.limit:
                self.over = True
                self.overflow()


async def _feed(stdin: asyncio.StreamWriter | None, payload: bytes) -> None:
    if stdin is None:
        return
    # A hook that does not read its stdin (or exits early) must not fail the run.
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        stdin.write(payload)
        await stdin.drain()
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        stdin.close()
        await stdin.wait_closed()


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


async def run_hook_process(
    argv: tuple[str, ...],
    *,
    payload: bytes,
    cwd: Path,
    env: Mapping[str, str],
    timeout: float,
    max_output: int,
) -> HookRun:
    """Run ``argv`` with ``payload`` on stdin; never raises for the command's failures.

    The command gets its own process group: a timeout, an oversized output or a
    cancellation (``/stop``) kills the group, grandchildren included.

    Raises:
        asyncio.CancelledError: the caller was cancelled (the group is killed first).
    """
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            cwd=cwd,
            env=dict(env),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
    except OSError as exc:
        return HookRun(None, failure=f"cannot start: {exc.strerror or exc}")
    kill = functools.partial(_kill_group, proc.pid)
    out, err = _Capped(max_output, kill), _Capped(max_output, kill)
    try:
        async with asyncio.timeout(timeout):
            _, _, _, code = await asyncio.gather(
                _feed(proc.stdin, payload),
                out.read(proc.stdout),
                err.read(proc.stderr),
                proc.wait(),
            )
    except TimeoutError:
        await _reap(proc)
        return HookRun(None, failure=f"timed out after {timeout:g} s", timed_out=True)
    except BaseException:
        await asyncio.shield(_reap(proc))
        raise
    for name, capped in (("stdout", out), ("stderr", err)):
        if capped.over:
            return HookRun(None, failure=f"wrote more than {max_output} bytes to {name}")
    if code < 0:
        return HookRun(code, bytes(out.data), bytes(err.data), failure=f"killed by signal {-code}")
    return HookRun(code, bytes(out.data), bytes(err.data))


async def _discard(stream: asyncio.StreamReader | None) -> None:
    if stream is not None:
        while await stream.read(65536):
            pass


async def _reap(proc: asyncio.subprocess.Process) -> None:
    """Kill the group, read the pipes to their end (so they close) and reap the process."""
    _kill_group(proc.pid)
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(_DRAIN):
            await asyncio.gather(_discard(proc.stdout), _discard(proc.stderr))
    with contextlib.suppress(ProcessLookupError):
        await proc.wait()
