"""The stdio transport of an MCP server, keeping what the SDK's own keeps to itself.

The SDK's ``stdio_client`` sends the server's stderr to ours and never tells how the
process ended, so a server that dies while starting (``npx`` refused by a proxy) left
only "connection closed" or a timeout. This transport (the SDK's public ``Transport``
protocol: a context manager yielding the read and write streams) records the exit
status and the tail of stderr in a `ProcessReport`, and ends the connection the
moment the process exits, even when a child of it still holds stdout.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import subprocess
from collections import deque
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import mcp_types
from anyio.abc import Process
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.os.posix.utilities import terminate_posix_process_tree
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from .redact import redact_urls

__all__ = ["ProcessReport", "stdio_transport"]

log = logging.getLogger(__name__)

TAIL_BYTES = 2048
"""Bytes of a server's stderr kept (its last lines): enough for npm's or Python's error."""
_TAIL_LINES = 20
_MIN_SECRET = 6
"""Shorter values handed to a server are not masked in its stderr (``1``, ``true``...)."""
_STDIN_GRACE = 2.0
"""Seconds a server has to exit after its stdin closes (the spec's shutdown), before
its process group gets SIGTERM."""
_KILL_AFTER = 2.0
_LAST_WORDS = 0.25
"""Seconds the lines a server wrote before it exited have to reach the session."""


class ProcessReport:
    """How one stdio server process ended (while it runs: nothing yet), and its stderr.

    Args:
        secrets: values handed to the server (its ``env``): masked in the stderr tail,
            which lands in the log, ``familiar mcp list`` and ``doctor``.
    """

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self.returncode: int | None = None
        self.exited = asyncio.Event()
        self._secrets = sorted({s for s in secrets if len(s) >= _MIN_SECRET}, key=len, reverse=True)
        self._chunks: deque[bytes] = deque()
        self._size = 0

    def feed(self, data: bytes) -> None:
        """Keep ``data`` (a piece of stderr), dropping what falls out of the last
        `TAIL_BYTES`."""
        self._chunks.append(data)
        self._size += len(data)
        while self._size - len(self._chunks[0]) >= TAIL_BYTES:
            self._size -= len(self._chunks.popleft())

    def stderr_tail(self) -> str | None:
        """The last lines of stderr (at most `TAIL_BYTES`), secrets masked; None if empty."""
        data = b"".join(self._chunks)[-TAIL_BYTES:]
        text = data.decode("utf-8", errors="replace")
        if self._size > TAIL_BYTES and "\n" in text:
            text = text.split("\n", 1)[1]  # a cut first line says nothing
        for secret in self._secrets:
            text = text.replace(secret, "***")
        lines = [line.rstrip() for line in redact_urls(text).splitlines() if line.strip()]
        return "\n".join(lines[-_TAIL_LINES:]) or None

    def exit_text(self) -> str | None:
        """``exited with status 1`` / ``killed by SIGKILL``; None while it runs."""
        code = self.returncode
        if code is None:
            return None
        if code < 0:
            with contextlib.suppress(ValueError):
                return f"killed by {signal.Signals(-code).name}"
            return f"killed by signal {-code}"
        return f"exited with status {code}"


def _parse(line: bytes) -> SessionMessage | Exception:
    try:
        return SessionMessage(mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except (ValidationError, ValueError) as exc:
        # Not the line itself: a server that logs to stdout may print what it was handed.
        log.warning("mcp stdio: a line of %d bytes on a server's stdout is not JSON-RPC", len(line))
        return exc


async def _wait_exited(report: ProcessReport, seconds: float) -> bool:
    with anyio.move_on_after(seconds):
        await report.exited.wait()
    return report.exited.is_set()


async def _stop(process: Process, report: ProcessReport) -> None:
    """The spec's shutdown: close stdin, wait, then terminate the process group."""
    if process.stdin is not None:
        with contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
            await process.stdin.aclose()
    await _wait_exited(report, _STDIN_GRACE)
    # Also when it exited: what it started (``npx`` -> node) may still run in its group.
    await terminate_posix_process_tree(process, _KILL_AFTER)
    if not await _wait_exited(report, _KILL_AFTER):
        log.warning("mcp stdio: server process %d survived SIGKILL", process.pid)
        return
    for stream in (process.stdout, process.stderr):
        if stream is not None:
            with contextlib.suppress(OSError, anyio.BrokenResourceError):
                await stream.aclose()


_Received = MemoryObjectReceiveStream[SessionMessage | Exception]
"""What the session reads: the server's messages, or why a line was not one."""


class _Pipes:
    """The tasks that carry a server process's pipes to and from the session's streams."""

    def __init__(self, process: Process, report: ProcessReport) -> None:
        self.process = process
        self.report = report
        self.to_session, self.read_stream = anyio.create_memory_object_stream[
            SessionMessage | Exception
        ](0)
        self.write_stream, self.from_session = anyio.create_memory_object_stream[SessionMessage](0)
        self.stdout_done = anyio.Event()

    async def read_stdout(self) -> None:
        assert self.process.stdout is not None
        buffer = b""
        try:
            async with self.to_session:
                async for chunk in self.process.stdout:
                    *lines, buffer = (buffer + chunk).split(b"\n")
                    for line in lines:
                        if line.strip():
                            await self.to_session.send(_parse(line))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            pass  # the session or the process went away: the connection is over
        finally:
            self.stdout_done.set()

    async def write_stdin(self) -> None:
        assert self.process.stdin is not None
        try:
            async with self.from_session:
                async for message in self.from_session:
                    data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    await self.process.stdin.send((data + "\n").encode())
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            await self.to_session.aclose()  # requests in flight see the connection end

    async def read_stderr(self) -> None:
        assert self.process.stderr is not None
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            async for chunk in self.process.stderr:
                self.report.feed(chunk)

    async def watch_exit(self) -> None:
        self.report.returncode = await self.process.wait()
        self.report.exited.set()
        with anyio.move_on_after(_LAST_WORDS):
            await self.stdout_done.wait()
        await self.to_session.aclose()  # even while a child of the server keeps stdout open


@asynccontextmanager
async def stdio_transport(
    *,
    command: str,
    args: list[str],
    env: Mapping[str, str],
    cwd: Path | str,
    report: ProcessReport,
) -> AsyncIterator[
    tuple[
        MemoryObjectReceiveStream[SessionMessage | Exception],
        MemoryObjectSendStream[SessionMessage],
    ]
]:
    """Run ``command`` (in a process group of its own) and talk JSON-RPC lines over its
    stdin and stdout; ``report`` gets its stderr and, once it ends, its exit status.

    Raises:
        OSError: the program cannot be started (not found, not executable).
    """
    process = await anyio.open_process(
        [command, *args],
        env=dict(env),
        cwd=cwd,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    pipes = _Pipes(process, report)
    async with anyio.create_task_group() as tasks:
        for task in (pipes.read_stdout, pipes.write_stdin, pipes.read_stderr, pipes.watch_exit):
            tasks.start_soon(task)
        try:
            yield pipes.read_stream, pipes.write_stream
        finally:
            with anyio.CancelScope(shield=True):
                await pipes.write_stream.aclose()
                await pipes.read_stream.aclose()
                await _stop(process, report)
            tasks.cancel_scope.cancel()
