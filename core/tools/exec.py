"""The ``exec`` tool: a shell command in the workspace, with a timeout and an output cap."""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import os
import re
import signal
from dataclasses import dataclass, field

from core.errors import PolicyDenied, ToolFailed, ToolRetry

from .base import Tool, ToolContext
from .config import DEFAULT_DENY_PATTERNS, ExecConfig, ToolsConfig
from .decorator import tool

__all__ = ["exec_tools"]

_DRAIN = 1.0
"""Seconds to wait for buffered output once the shell exited (or was killed)."""
_HIDDEN_ENV_PREFIX = "FAMILIAR_"
"""The daemon's own settings (API keys included) are not passed to commands."""


@dataclass
class _CappedText:
    """Keeps the head and tail of a stream of text, counting what was dropped."""

    limit: int
    head: str = ""
    tail: str = ""
    total: int = 0
    _decoder: codecs.IncrementalDecoder = field(
        default_factory=lambda: codecs.getincrementaldecoder("utf-8")(errors="replace")
    )

    def feed(self, data: bytes, *, final: bool = False) -> None:
        text = self._decoder.decode(data, final)
        self.total += len(text)
        keep_head = self.limit // 2 - len(self.head)
        if keep_head > 0:
            self.head += text[:keep_head]
            text = text[keep_head:]
        self.tail = (self.tail + text)[-(self.limit - self.limit // 2) :]

    def render(self) -> str:
        dropped = self.total - len(self.head) - len(self.tail)
        if dropped <= 0:
            return self.head + self.tail
        return f"{self.head}\n[... {dropped} chars truncated ...]\n{self.tail}"


class _OutputProtocol(asyncio.Protocol):
    """Reads the command's output pipe into a ``_CappedText``; ``done`` resolves at EOF."""

    def __init__(self, output: _CappedText) -> None:
        self.output = output
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def data_received(self, data: bytes) -> None:
        self.output.feed(data)

    def connection_lost(self, exc: Exception | None) -> None:
        self.output.feed(b"", final=True)
        if not self.done.done():
            self.done.set_result(None)


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _check_denied(command: str, patterns: list[tuple[re.Pattern[str], str]]) -> None:
    for regex, reason in patterns:
        if regex.search(command):
            why = f"it {reason}" if reason else f"it matches deny pattern {regex.pattern!r}"
            raise PolicyDenied(f"command refused: {why} (tools.exec.deny_patterns)")


async def _drain(protocol: _OutputProtocol) -> None:
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(_DRAIN):
            await asyncio.shield(protocol.done)


async def _spawn(command: str, ctx: ToolContext, out_fd: int) -> asyncio.subprocess.Process:
    env = {k: v for k, v in os.environ.items() if not k.startswith(_HIDDEN_ENV_PREFIX)}
    try:
        return await asyncio.create_subprocess_shell(
            command,
            cwd=ctx.workspace,
            env=env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=out_fd,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,  # its own process group, so a kill takes the children too
        )
    except OSError as exc:
        raise ToolFailed(f"cannot start the command: {exc}") from exc
    finally:
        os.close(out_fd)


async def _run(command: str, ctx: ToolContext, limit: float, max_output: int) -> str:
    # A pipe we own rather than PIPE: on Python 3.11 Process.wait() also waits for the
    # pipes to close, which a background child (even one outside the group) can delay
    # forever. Here wait() returns when the shell exits and we close the pipe ourselves.
    read_fd, write_fd = os.pipe()
    try:
        proc = await _spawn(command, ctx, write_fd)
    except BaseException:
        os.close(read_fd)
        raise
    output = _CappedText(limit=max_output)
    transport, protocol = await asyncio.get_running_loop().connect_read_pipe(
        lambda: _OutputProtocol(output), os.fdopen(read_fd, "rb", buffering=0)
    )
    try:
        async with asyncio.timeout(limit):
            code = await proc.wait()
        await _drain(protocol)
    except TimeoutError:
        _kill_group(proc.pid)
        await proc.wait()
        await _drain(protocol)
        raise ToolFailed(
            f"command timed out after {limit:g}s; output so far:\n"
            f"{output.render() or '(no output)'}"
        ) from None
    except BaseException:  # cancelled: leave nothing running behind us
        _kill_group(proc.pid)
        await proc.wait()
        raise
    finally:
        transport.close()
    return f"exit code {code}\n{output.render() or '(no output)'}"


def exec_tools(config: ToolsConfig) -> list[Tool]:
    """The ``exec`` tool, or no tool when ``tools.exec.enabled`` is false.

    Args:
        config: the ``[tools]`` section.
    """
    cfg: ExecConfig = config.exec
    if not cfg.enabled:
        return []
    patterns = [(re.compile(p), DEFAULT_DENY_PATTERNS.get(p, "")) for p in cfg.deny_patterns]
    description = (
        "Run a shell command in the workspace (stdin is empty; stdout and stderr are "
        f"combined). Returns the exit code and the output. Default timeout {cfg.timeout:g}s, "
        f"at most {cfg.max_timeout:g}s."
    )

    # The argument is the model's public ``timeout`` (design.md), hence the noqa.
    @tool(name="exec", description=description)
    async def exec_(ctx: ToolContext, command: str, timeout: float | None = None) -> str:
        """Run a shell command in the workspace.

        Args:
            command: the shell command line (run by /bin/sh).
            timeout: seconds before the command and its children are killed.
        """
        limit = cfg.timeout if timeout is None else timeout
        if not 0 < limit <= cfg.max_timeout:
            raise ToolRetry(f"timeout must be > 0 and at most {cfg.max_timeout:g} seconds")
        _check_denied(command, patterns)
        return await _run(command, ctx, limit, cfg.max_output)

    return [exec_]
