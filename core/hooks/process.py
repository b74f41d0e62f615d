"""Runs one hook command: payload on stdin, capped stdout/stderr, a timeout that kills
the command's whole process group, and the allow-listed environment of ``exec``."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = ["HookRun", "run_hook_process"]


@dataclass(frozen=True, slots=True)
class HookRun:
    """What a hook process did. ``failure`` is set when it did not finish properly."""

    exit_code: int | None
    stdout: bytes = b""
    stderr: bytes = b""
    failure: str | None = None
    timed_out: bool = False


class _TooMuch(Exception):
    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.stream = stream


async def _read_capped(stream: asyncio.StreamReader | None, limit: int, name: str) -> bytes:
    if stream is None:
        return b""
    data = bytearray()
    while chunk := await stream.read(65536):
        data += chunk
        if len(data) > limit:
            raise _TooMuch(name)
    return bytes(data)


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
    try:
        async with asyncio.timeout(timeout):
            _, out, err, code = await asyncio.gather(
                _feed(proc.stdin, payload),
                _read_capped(proc.stdout, max_output, "stdout"),
                _read_capped(proc.stderr, max_output, "stderr"),
                proc.wait(),
            )
    except TimeoutError:
        await _reap(proc)
        return HookRun(None, failure=f"timed out after {timeout:g} s", timed_out=True)
    except _TooMuch as exc:
        await _reap(proc)
        return HookRun(None, failure=f"wrote more than {max_output} bytes to {exc.stream}")
    except BaseException:
        await asyncio.shield(_reap(proc))
        raise
    if code < 0:
        return HookRun(code, out, err, failure=f"killed by signal {-code}")
    return HookRun(code, out, err)


async def _reap(proc: asyncio.subprocess.Process) -> None:
    _kill_group(proc.pid)
    with contextlib.suppress(ProcessLookupError):
        await proc.wait()
