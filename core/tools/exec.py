"""The ``exec`` tool: a sandboxed shell command in the workspace, with a timeout, an output
cap, and an approval gate for dangerous commands (``core.tools.danger``, ``core.tools.approvals``).
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import logging
import os
import signal
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from core.errors import PolicyDenied, ToolFailed, ToolRetry

from .base import Tool, ToolContext
from .config import ExecConfig, ToolsConfig
from .danger import DangerMatcher
from .decorator import tool
from .exec_client import UnitTimeout, run_in_unit
from .sandbox import BwrapSandbox, Sandbox, SandboxChoice, SandboxSelector, SystemdSandbox
from .write_guard import WriteGuard, readonly_binds

__all__ = ["ApprovalGate", "ExecRunner", "exec_tools"]

log = logging.getLogger(__name__)

_DRAIN = 1.0
"""Seconds to wait for buffered output once the shell exited (or was killed)."""


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


class ApprovalGate(Protocol):
    """Where a command that needs the user's approval goes instead of running."""

    async def request(self, ctx: ToolContext, command: str, *, timeout: float, reason: str) -> str:
        """Record a pending approval; returns the tool result telling the model so."""
        ...


async def _drain(protocol: _OutputProtocol) -> None:
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(_DRAIN):
            await asyncio.shield(protocol.done)


async def _spawn(
    command: str, ctx: ToolContext, out_fd: int, sandbox: Sandbox, protect: list[str]
) -> asyncio.subprocess.Process:
    try:
        return await asyncio.create_subprocess_exec(
            *sandbox.argv(command, ctx.workspace, protect),
            cwd=ctx.workspace,
            env=sandbox.env(ctx.workspace),  # an allow-list: never the daemon's environment
            stdin=asyncio.subprocess.DEVNULL,
            stdout=out_fd,
            stderr=asyncio.subprocess.STDOUT,
            # Its own process group, so a kill takes the children too. In bubblewrap the
            # group is bwrap alone: killing it kills its whole PID namespace.
            start_new_session=True,
        )
    except OSError as exc:
        raise ToolFailed(f"cannot start the command: {exc}") from exc
    finally:
        os.close(out_fd)


async def _run(
    command: str,
    ctx: ToolContext,
    limit: float,
    max_output: int,
    sandbox: Sandbox,
    readonly: Sequence[Path] = (),
) -> str:
    # A pipe we own rather than PIPE: on Python 3.11 Process.wait() also waits for the
    # pipes to close, which a background child (even one outside the group) can delay
    # forever. Here wait() returns when the shell exits and we close the pipe ourselves.
    protect = await asyncio.to_thread(sandbox.protect, ctx.workspace)
    if readonly and isinstance(sandbox, BwrapSandbox):
        protect += await asyncio.to_thread(readonly_binds, readonly)
    read_fd, write_fd = os.pipe()
    # Shielded: cancelled mid-start, asyncio would kill the shell alone and leave its
    # children running; here the start completes and the whole group is killed.
    spawning = asyncio.ensure_future(_spawn(command, ctx, write_fd, sandbox, protect))
    try:
        proc = await asyncio.shield(spawning)
    except asyncio.CancelledError:
        os.close(read_fd)
        with contextlib.suppress(Exception):
            started = await spawning
            _kill_group(started.pid)
            await started.wait()
        raise
    except BaseException:
        os.close(read_fd)
        raise
    output = _CappedText(limit=max_output)
    pipe = os.fdopen(read_fd, "rb", buffering=0)
    try:
        transport, protocol = await asyncio.get_running_loop().connect_read_pipe(
            lambda: _OutputProtocol(output), pipe
        )
    except BaseException:  # cancelled while the command already runs: kill it too
        pipe.close()
        _kill_group(proc.pid)
        await proc.wait()
        raise
    try:
        async with asyncio.timeout(limit):
            code = await proc.wait()
        await _drain(protocol)
    except TimeoutError:
        _kill_group(proc.pid)
        await proc.wait()
        await _drain(protocol)
        raise _timed_out(limit, output) from None
    except BaseException:  # cancelled: leave nothing running behind us
        _kill_group(proc.pid)
        await proc.wait()
        raise
    finally:
        transport.close()
    return f"exit code {code}\n{output.render() or '(no output)'}"


def _timed_out(limit: float, output: _CappedText) -> ToolFailed:
    return ToolFailed(
        f"command timed out after {limit:g}s; output so far:\n{output.render() or '(no output)'}"
    )


async def _run_in_unit(
    command: str,
    ctx: ToolContext,
    limit: float,
    max_output: int,
    sandbox: SystemdSandbox,
    readonly: Sequence[Path] = (),
) -> str:
    # The unit mounts the guarded directories read-only for every command
    # (ReadOnlyPaths=-...): make sure they exist before the instance starts, or a
    # command could create one and write into it.
    if readonly:
        await asyncio.to_thread(readonly_binds, readonly)
    output = _CappedText(limit=max_output)
    try:
        code = await run_in_unit(sandbox, command, ctx.workspace, limit, output.feed)
    except UnitTimeout:
        output.feed(b"", final=True)
        raise _timed_out(limit, output) from None
    output.feed(b"", final=True)
    return f"exit code {code}\n{output.render() or '(no output)'}"


class ExecRunner:
    """Runs a command the way ``exec`` does: in the workspace, within the limits.

    An approved command runs through here too, so it gets the same treatment.

    Args:
        config: the ``[tools.exec]`` section.
        guards: parts of the workspace some sessions may not write: read-only for
            their commands in the bubblewrap sandbox.
    """

    def __init__(self, config: ExecConfig, *, guards: Sequence[WriteGuard] = ()) -> None:
        self.config = config
        self._sandboxes = SandboxSelector(config)
        self._guards = tuple(guards)

    def limit(self, timeout: float | None) -> float:
        """The timeout to use: the call's, else the default (ToolRetry when out of range)."""
        cfg = self.config
        limit = cfg.timeout if timeout is None else timeout
        if not 0 < limit <= cfg.max_timeout:
            raise ToolRetry(f"timeout must be > 0 and at most {cfg.max_timeout:g} seconds")
        return limit

    async def sandbox(self) -> SandboxChoice:
        """Where this process runs commands: what status and doctor report."""
        return await self._sandboxes.choice()

    async def admit(self, ctx: ToolContext) -> Sandbox:
        """The sandbox for a command from ``ctx``'s conversation, or ToolFailed.

        Without a working sandbox (``auto`` fell back to the host) only a conversation
        the operator started in the local CLI may run commands; Slack, Teams, webhook
        callers and every subagent or schedule they started are refused, unless the
        operator chose ``tools.exec.sandbox = "none"``.
        """
        choice = await self._sandboxes.choice()
        sandbox = choice.require()
        if isinstance(sandbox, SystemdSandbox):  # a unit that fails is the command's error
            return sandbox
        if choice.mode != "auto" or choice.problem == "":
            return sandbox
        if ctx.root_is_local_cli:
            return sandbox
        raise ToolFailed(
            "exec is refused: bubblewrap does not work here, so the command would run "
            f"on the host unsandboxed, and this conversation started on {ctx.root_channel!r} "
            f"({ctx.root_session_key}), not the local CLI. The operator can fix the sandbox "
            '(`familiar doctor` says what blocks it) or set tools.exec.sandbox = "none" '
            f"to run commands from every channel on the host. Sandbox problem: {choice.problem}"
        )

    async def run(self, command: str, ctx: ToolContext, timeout: float | None = None) -> str:
        """Run ``command``; ``"exit code N\\n<output>"`` (ToolFailed on timeout or when
        `admit` refuses)."""
        sandbox = await self.admit(ctx)
        limit = self.limit(timeout)
        readonly = [d for guard in self._guards for d in guard.readonly_dirs(ctx)]
        # A hook or MCP file a command creates is not removed: the gateway ignores it
        # until the operator trusts it (core.trust), however it got there.
        if isinstance(sandbox, SystemdSandbox):
            max_output = self.config.max_output
            return await _run_in_unit(command, ctx, limit, max_output, sandbox, readonly)
        return await _run(command, ctx, limit, self.config.max_output, sandbox, readonly)


def _needs_approval(cfg: ExecConfig, danger: str | None) -> str | None:
    """Why a command waits for approval under ``tools.exec.approval``, or None."""
    if cfg.approval == "always":
        return danger or 'is a shell command and tools.exec.approval is "always"'
    return danger if cfg.approval == "dangerous" else None


def exec_tools(
    config: ToolsConfig,
    *,
    runner: ExecRunner | None = None,
    approvals: ApprovalGate | None = None,
) -> list[Tool]:
    """The ``exec`` tool, or no tool when ``tools.exec.enabled`` is false.

    Args:
        config: the ``[tools]`` section.
        runner: runs the commands (default: one on ``config.exec``).
        approvals: takes commands that need approval; without one they are refused.
    """
    cfg: ExecConfig = config.exec
    if not cfg.enabled:
        return []
    run = runner or ExecRunner(cfg)
    deny = DangerMatcher(cfg.deny_patterns, reasons={}, kind="deny")
    danger = DangerMatcher(cfg.danger_patterns)
    description = (
        "Run a shell command in the workspace (stdin is empty; stdout and stderr are "
        f"combined). Returns the exit code and the output. Default timeout {cfg.timeout:g}s, "
        f"at most {cfg.max_timeout:g}s. Dangerous commands wait for the user's approval."
    )

    # The argument is the model's public ``timeout`` (design.md), hence the noqa.
    @tool(name="exec", description=description)
    async def exec_(ctx: ToolContext, command: str, timeout: float | None = None) -> str:
        """Run a shell command in the workspace.

        Args:
            command: the shell command line (run by /bin/sh).
            timeout: seconds before the command and its children are killed.
        """
        limit = run.limit(timeout)
        await run.admit(ctx)  # before asking for an approval that could not be used
        refused = deny.reason(command, cwd=str(ctx.workspace))
        if refused is not None:
            raise PolicyDenied(f"command refused: it {refused} (tools.exec.deny_patterns)")
        reason = danger.reason(command, cwd=str(ctx.workspace))
        why = _needs_approval(cfg, reason)
        if why is not None:
            if approvals is None:
                raise PolicyDenied(
                    f"command refused: it {why}, and no one can approve it here "
                    "(tools.exec.approval)"
                )
            return await approvals.request(ctx, command, timeout=limit, reason=why)
        if reason is not None:
            log.warning("running a dangerous command (tools.exec.approval = never): it %s", reason)
        return await run.run(command, ctx, limit)

    return [exec_]
