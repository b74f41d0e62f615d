"""McpConnection: one MCP server, owned by one long-lived task that restarts it when it fails.

The SDK's ``Client`` holds anyio cancel scopes that must be entered and exited in the
same task, so the owner task enters it, waits until the connection breaks or is
stopped, and exits it; calls run in the callers' tasks on the open client.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AsyncExitStack
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types
from mcp.client.session import ClientRequestContext, IncomingMessage
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.exceptions import MCPError

from core.errors import ConfigError, McpRefused, ToolFailed

from .config import McpServerConfig
from .host import CallOwner, McpHost, related_task
from .redact import redact_urls
from .session import OpenSession, open_session
from .state import ServerState
from .stdio import ProcessReport, stdio_transport

__all__ = ["McpConnection", "ProgressFn", "ServerState", "redact_urls"]

log = logging.getLogger(__name__)

_BROKEN = (
    anyio.ClosedResourceError,
    anyio.BrokenResourceError,
    httpx2.TransportError,
    ConnectionError,
)
"""Transport failures: the connection is gone, the server gets restarted."""
_MAX_TOOL_PAGES = 50
_CLOSED = ("Connection closed", "the connection broke")
"""What a connection whose process ended says: its exit status says more."""
_BASE_ENV = ("HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER")
"""The daemon's variables every stdio server gets (as the SDK's own stdio transport
gives), so ``npx`` and ``uvx`` are found and find their caches."""

ProgressFn = ProgressFnT
"""Called with each progress notification of a call: ``(progress, total, message)``."""


class McpConnection:
    """One configured MCP server: connects, lists its tools, runs calls, restarts on failure.

    Args:
        name: the server's name (``mcp__<name>__<tool>``).
        config: its definition.
        cwd: the working directory of a stdio server that names none (not the
            workspace: the agent writes there, and ``npx``/``uv run`` run what they find).
        connect_timeout: seconds to start and list the tools.
        backoff: seconds before the first restart; doubles up to ``max_backoff``.
        max_backoff: the longest wait between restarts.
        on_tools: called (in the owner task) each time the tool list is (re)loaded.
        verify: why the server may not start now (None: it may); asked before each start.
        passthrough: names of the daemon's variables every stdio server gets
            (``[mcp] env_passthrough``), beside the server's own ``env_passthrough``.
        on_change: called whenever its state, error or tools change.
        host: answers the server's questions to the person, requests for the model and
            task progress (None: they are refused).
    """

    def __init__(
        self,
        *,
        name: str,
        config: McpServerConfig,
        cwd: Path,
        connect_timeout: float = 30.0,
        backoff: float = 0.5,
        max_backoff: float = 60.0,
        on_tools: Callable[[McpConnection], None] | None = None,
        verify: Callable[[McpServerConfig], str | None] | None = None,
        passthrough: Sequence[str] = (),
        on_change: Callable[[McpConnection], None] | None = None,
        host: McpHost | None = None,
    ) -> None:
        self.name = name
        self.config = config
        self._cwd = cwd
        self._connect_timeout = connect_timeout
        self._backoff = backoff
        self._max_backoff = max_backoff
        self._on_tools = on_tools
        self._verify = verify
        self._passthrough = tuple(passthrough)
        self._on_change = on_change
        self.host = host
        self._callers: list[CallOwner] = []
        """Owners of the plain calls running now (a server's question during a call
        goes to the newest)."""
        self.state = ServerState.STOPPED
        self.error: str | None = None
        """Why the last connection failed or ended (None while it is fine)."""
        self.stderr: str | None = None
        """The end of a stdio server's stderr when its last process failed (secrets
        masked; None once it is ready again)."""
        self.exit_status: int | None = None
        """How that process ended (negative: the signal that killed it)."""
        self._process: ProcessReport | None = None
        self.tools: list[mcp_types.Tool] = []
        """The server's tools as last listed (after the ``tools`` allow-list)."""
        self.starts = 0
        """Connections opened so far (1 after the first start; more after restarts)."""
        self._client: OpenSession | None = None
        self._ready = asyncio.Event()
        self._settled = asyncio.Event()
        """Set once the first connection attempt ended (ready or failed)."""
        self._broken = asyncio.Event()
        self._stopping = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.sse_fallback = False
        """An ``http`` server that did not speak streamable HTTP is tried over SSE."""

    def start(self) -> None:
        """Start the owner task (connects in the background; never raises)."""
        if self._task is None or self._task.done():
            self._stopping.clear()
            self._task = asyncio.create_task(self._own(), name=f"mcp:{self.name}")

    async def stop(self) -> None:
        """Close the connection (a stdio server is terminated) and end the owner task."""
        self._stopping.set()
        if self._task is not None:
            if self.state is not ServerState.READY:
                # Still connecting (maybe to a server that never answers): don't wait
                # out connect_timeout. A ready connection closes on the stop event.
                self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        self._set(ServerState.STOPPED)

    def _set(self, state: ServerState) -> None:
        self.state = state
        self._changed()

    def _changed(self) -> None:
        if self._on_change is not None:
            self._on_change(self)

    @property
    def started(self) -> bool:
        """Whether :meth:`start` was called (and not undone by :meth:`stop`)."""
        return self._task is not None

    async def wait_settled(self, timeout: float) -> bool:
        """Wait until the first connection attempt ended; True when the server is ready."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await self._settled.wait()
        return self.state is ServerState.READY

    async def call(
        self,
        tool: str,
        arguments: dict[str, Any],
        *,
        progress: ProgressFn | None = None,
        owner: CallOwner | None = None,
    ) -> mcp_types.CallToolResult:
        """Call ``tool`` on the server, within the server's ``timeout``.

        With ``progress``, the request carries a ``progressToken`` and each progress
        notification of the server for it is handed to ``progress``. ``owner``: whose
        conversation a question of the server during the call goes to.

        Raises:
            ToolFailed: the server is not available, the call timed out, or the
                connection broke during the call (the server is then restarted).
        """
        client = await self._connected()
        timeout = self.config.timeout
        if owner is not None:
            self._callers.append(owner)
        try:
            with self._failures(tool):
                async with asyncio.timeout(timeout):
                    result = await client.session.call_tool(
                        tool, arguments, read_timeout_seconds=timeout, progress_callback=progress
                    )
        finally:
            if owner is not None:
                self._callers.remove(owner)
        if not isinstance(result, mcp_types.CallToolResult):
            raise ToolFailed(f"MCP server {self.name!r} answered {tool} with an unexpected result")
        return result

    async def request(
        self, method: str, params: dict[str, Any], *, what: str, timeout: float | None = None
    ) -> dict[str, Any]:
        """Send ``method`` (one the SDK has no typed call for: the task requests) and
        return its raw result; errors as for :meth:`call` (``what`` names it in them)."""
        client = await self._connected()
        limit = self.config.timeout if timeout is None else timeout
        with self._failures(what):
            async with asyncio.timeout(limit):
                return await client.raw(method, params, timeout=limit)

    @contextlib.contextmanager
    def _failures(self, what: str) -> Iterator[None]:
        """Turn a timeout or a lost connection during ``what`` into ToolFailed (the
        server is then restarted), the server's refusal into McpRefused."""
        try:
            yield
        except TimeoutError:
            raise self._timed_out(what) from None
        except MCPError as exc:
            if exc.code == mcp_types.REQUEST_TIMEOUT:
                raise self._timed_out(what) from exc
            if exc.code == mcp_types.CONNECTION_CLOSED:
                raise self._lost(what, exc) from exc
            raise McpRefused(
                f"MCP server {self.name!r} refused {what}: {exc.message}", code=exc.code
            ) from exc
        except _BROKEN as exc:
            raise self._lost(what, exc) from exc

    def _owner_of(self, task: str | None) -> CallOwner | None:
        return None if task is not None or not self._callers else self._callers[-1]

    async def _elicit(
        self, context: ClientRequestContext, params: Any
    ) -> mcp_types.ElicitResult | mcp_types.ErrorData:
        task = related_task(context.meta)
        if self.host is None:
            return mcp_types.ErrorData(code=mcp_types.INVALID_REQUEST, message="nobody to ask")
        if task is None and len({c.root_key for c in self._callers}) > 1:
            # Which call asks is not on the wire (stdio): never ask the wrong person.
            log.warning(
                "mcp server %s: a question during calls of several sessions refused", self.name
            )
            return mcp_types.ErrorData(
                code=mcp_types.INVALID_REQUEST,
                message="several conversations are calling this server now; "
                "familiar cannot tell whose question this is",
            )
        return await self.host.elicit(self.name, self._owner_of(task), task, params)

    async def _sample(
        self, context: ClientRequestContext, params: mcp_types.CreateMessageRequestParams
    ) -> Any:
        task = related_task(context.meta)
        if self.host is None:
            return mcp_types.ErrorData(code=mcp_types.INVALID_REQUEST, message="sampling is off")
        if task is None and len({c.session_key for c in self._callers}) > 1:
            # As for questions: never record the request and its cost on the wrong session.
            log.warning(
                "mcp server %s: a sampling request during calls of several sessions refused",
                self.name,
            )
            return mcp_types.ErrorData(
                code=mcp_types.INVALID_REQUEST,
                message="several conversations are calling this server now; "
                "familiar cannot tell whose request this is",
            )
        return await self.host.sample(self.name, self._owner_of(task), task, params)

    async def _on_message(self, message: IncomingMessage) -> None:
        if isinstance(message, mcp_types.ProgressNotification) and self.host is not None:
            await self.host.progress(self.name, message)
        elif isinstance(message, mcp_types.ToolListChangedNotification):
            client = self._client
            if client is not None:
                tools = await _list_tools(client)
                self.tools = [t for t in tools if self._offered(t.name)]
                log.info("mcp server %s tools changed: %d tools", self.name, len(self.tools))
                if self._on_tools is not None:
                    self._on_tools(self)
                self._changed()

    def _timed_out(self, tool: str) -> ToolFailed:
        return ToolFailed(
            f"MCP tool {tool} on server {self.name!r} timed out after {self.config.timeout:g} s"
        )

    def _lost(self, tool: str, exc: BaseException) -> ToolFailed:
        self._broken.set()
        detail = redact_urls(getattr(exc, "message", None) or str(exc) or type(exc).__name__)
        log.warning("mcp server %s: connection lost during %s: %s", self.name, tool, detail)
        return ToolFailed(
            f"lost the connection to MCP server {self.name!r} calling {tool} ({detail}); "
            "the server is being restarted, the call may be retried"
        )

    async def _connected(self) -> OpenSession:
        if self._client is not None and self.state is ServerState.READY:
            return self._client
        if self._task is None:
            raise ToolFailed(f"MCP server {self.name!r} is not running")
        if self.state is ServerState.STARTING:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._connect_timeout):
                    await self._ready.wait()
        if self._client is None or self.state is not ServerState.READY:
            why = f": {self.error}" if self.error else ""
            raise ToolFailed(f"MCP server {self.name!r} is not available{why}")
        return self._client

    async def _own(self) -> None:
        delay = self._backoff
        while not self._stopping.is_set():
            began = time.monotonic()
            try:
                await self._session()
            except Exception as exc:
                starting = self.state is ServerState.STARTING
                self._failed(_describe(exc, self._connect_timeout), starting=starting)
                if self.config.transport == "http" and self.starts == 0:
                    self.sse_fallback = not self.sse_fallback
                    if self.sse_fallback:
                        continue  # try SSE at once; back to streamable HTTP if that fails
            finally:
                self._client = None
                self._ready.clear()
            self._settled.set()
            if self._stopping.is_set():
                break
            self._set(ServerState.FAILED)
            if time.monotonic() - began > self._max_backoff:
                delay = self._backoff  # it ran for a while: restart promptly
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(delay):
                    await self._stopping.wait()
            delay = min(delay * 2, self._max_backoff)

    def _failed(self, error: str, *, starting: bool = False) -> None:
        """Record (and log, one line) why the connection failed or ended, with how the
        server's process ended and the end of its stderr."""
        process = self._process
        ended = process.exit_text() if process is not None else None
        self.exit_status = process.returncode if process is not None else None
        self.stderr = process.stderr_tail() if process is not None else None
        if ended is not None:
            ended += " during start-up" if starting else ""
            error = ended if error in _CLOSED else f"{ended}: {error}"
        self.error = error
        stderr = f" stderr={json.dumps(self.stderr)}" if self.stderr else ""
        log.warning("mcp server %s failed: %s%s", self.name, self.error, stderr)

    async def _session(self) -> None:
        self._process = None
        self._set(ServerState.STARTING)
        self._broken.clear()
        if self._verify is not None:
            refused = await asyncio.to_thread(self._verify, self.config)
            if refused is not None:
                raise ConfigError(refused, key="trust")
        async with AsyncExitStack() as stack:
            async with asyncio.timeout(self._connect_timeout):
                client = await open_session(
                    stack,
                    self._transport(stack),
                    sampling=self.config.sampling,
                    elicitation_callback=self._elicit,
                    sampling_callback=self._sample,
                    message_handler=self._on_message,
                )
                tools = await _list_tools(client)
            self.starts += 1
            self.tools = [t for t in tools if self._offered(t.name)]
            self._client = client
            self.error = self.stderr = self.exit_status = None
            self.state = ServerState.READY
            self._ready.set()
            self._settled.set()
            log.info("mcp server %s ready: %d tools", self.name, len(self.tools))
            if self._on_tools is not None:
                self._on_tools(self)
            self._changed()
            ends = [self._stopping.wait(), self._broken.wait()]
            if self._process is not None:
                ends.append(self._process.exited.wait())  # a crash, noticed while idle
            waits = [asyncio.ensure_future(end) for end in ends]
            try:
                await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for wait in waits:
                    wait.cancel()
            self._client = None
            self._ready.clear()
        if not self._stopping.is_set():
            # Out of the client's context: a stdio server's process has been reaped.
            self._failed("the connection broke")

    def _base_env(self) -> dict[str, str]:
        """The daemon's variables every server gets: a minimal base, not its secrets."""
        return {k: v for k in _BASE_ENV if (v := os.environ.get(k)) is not None}

    def _stdio_env(self) -> dict[str, str]:
        """What a stdio server gets beyond the base: the passed-through variables
        that are set, then its ``env`` (which wins)."""
        names = (*self._passthrough, *self.config.env_passthrough)
        passed = {k: v for k in names if (v := os.environ.get(k)) is not None}
        return passed | self.config.env_values()

    def _offered(self, tool: str) -> bool:
        patterns = self.config.tools
        return patterns is None or any(fnmatchcase(tool, p) for p in patterns)

    def _transport(self, stack: AsyncExitStack) -> Any:
        cfg = self.config
        if cfg.transport == "stdio":
            env = self._stdio_env()
            self._process = ProcessReport(secrets=[*cfg.env_values().values(), *env.values()])
            return stdio_transport(
                command=cfg.command or "",
                args=cfg.args,
                env=self._base_env() | env,
                cwd=cfg.cwd or self._cwd,
                report=self._process,
            )
        headers = cfg.header_values()
        http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0, read=300.0))
        stack.push_async_callback(http.aclose)
        url = cfg.url or ""
        if cfg.transport == "sse" or self.sse_fallback:
            return sse_client(url, headers=headers)
        return streamable_http_client(url, http_client=http)


async def _list_tools(client: OpenSession) -> list[mcp_types.Tool]:
    tools: list[mcp_types.Tool] = []
    cursor: str | None = None
    for _ in range(_MAX_TOOL_PAGES):
        params = mcp_types.PaginatedRequestParams(cursor=cursor)
        page = await client.session.list_tools(params=params)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            break
    return tools


def _describe(exc: BaseException, connect_timeout: float) -> str:
    if isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        return _describe(exc.exceptions[0], connect_timeout)
    if isinstance(exc, TimeoutError):
        return f"did not start within {connect_timeout:g} s"
    if isinstance(exc, MCPError):
        return redact_urls(exc.message)
    if isinstance(exc, ConfigError):
        return str(exc)
    return redact_urls(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)
