"""McpConnection: one MCP server, owned by one long-lived task that restarts it when it fails.

The SDK's ``Client`` holds anyio cancel scopes that must be entered and exited in the
same task, so the owner task enters it, waits until the connection breaks or is
stopped, and exits it; calls run in the callers' tasks on the open client.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from collections.abc import Callable
from contextlib import AsyncExitStack
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types
from mcp import Client, StdioServerParameters
from mcp.client.sse import sse_client
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from core.errors import ConfigError, ToolFailed

from .config import McpServerConfig
from .state import ServerState

__all__ = ["McpConnection", "ServerState"]

log = logging.getLogger(__name__)

_BROKEN = (
    anyio.ClosedResourceError,
    anyio.BrokenResourceError,
    httpx2.TransportError,
    ConnectionError,
)
"""Transport failures: the connection is gone, the server gets restarted."""
_MAX_TOOL_PAGES = 50


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
    ) -> None:
        self.name = name
        self.config = config
        self._cwd = cwd
        self._connect_timeout = connect_timeout
        self._backoff = backoff
        self._max_backoff = max_backoff
        self._on_tools = on_tools
        self._verify = verify
        self.state = ServerState.STOPPED
        self.error: str | None = None
        """Why the last connection failed or ended (None while it is fine)."""
        self.tools: list[mcp_types.Tool] = []
        """The server's tools as last listed (after the ``tools`` allow-list)."""
        self.starts = 0
        """Connections opened so far (1 after the first start; more after restarts)."""
        self._client: Client | None = None
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
        self.state = ServerState.STOPPED

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

    async def call(self, tool: str, arguments: dict[str, Any]) -> mcp_types.CallToolResult:
        """Call ``tool`` on the server, within the server's ``timeout``.

        Raises:
            ToolFailed: the server is not available, the call timed out, or the
                connection broke during the call (the server is then restarted).
        """
        client = await self._connected()
        timeout = self.config.timeout
        try:
            async with asyncio.timeout(timeout):
                return await client.call_tool(tool, arguments, read_timeout_seconds=timeout)
        except TimeoutError:
            raise self._timed_out(tool) from None
        except MCPError as exc:
            if exc.code == mcp_types.REQUEST_TIMEOUT:
                raise self._timed_out(tool) from exc
            if exc.code == mcp_types.CONNECTION_CLOSED:
                raise self._lost(tool, exc) from exc
            raise ToolFailed(f"MCP server {self.name!r} refused {tool}: {exc.message}") from exc
        except _BROKEN as exc:
            raise self._lost(tool, exc) from exc

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

    async def _connected(self) -> Client:
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
                self.error = _describe(exc)
                log.warning("mcp server %s failed: %s", self.name, self.error)
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
            self.state = ServerState.FAILED
            if time.monotonic() - began > self._max_backoff:
                delay = self._backoff  # it ran for a while: restart promptly
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(delay):
                    await self._stopping.wait()
            delay = min(delay * 2, self._max_backoff)

    async def _session(self) -> None:
        self.state = ServerState.STARTING
        self._broken.clear()
        if self._verify is not None:
            refused = await asyncio.to_thread(self._verify, self.config)
            if refused is not None:
                raise ConfigError(refused, key="trust")
        async with AsyncExitStack() as stack:
            async with asyncio.timeout(self._connect_timeout):
                client = await stack.enter_async_context(Client(self._transport(stack)))
                tools = await _list_tools(client)
            self.starts += 1
            self.tools = [t for t in tools if self._offered(t.name)]
            self._client = client
            self.error = None
            self.state = ServerState.READY
            self._ready.set()
            self._settled.set()
            log.info("mcp server %s ready: %d tools", self.name, len(self.tools))
            if self._on_tools is not None:
                self._on_tools(self)
            stop = asyncio.ensure_future(self._stopping.wait())
            broken = asyncio.ensure_future(self._broken.wait())
            try:
                await asyncio.wait({stop, broken}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                stop.cancel()
                broken.cancel()
            self._client = None
            self._ready.clear()
            if self._broken.is_set():
                self.error = "the connection broke"

    def _offered(self, tool: str) -> bool:
        patterns = self.config.tools
        return patterns is None or any(fnmatchcase(tool, p) for p in patterns)

    def _transport(self, stack: AsyncExitStack) -> Any:
        cfg = self.config
        if cfg.transport == "stdio":
            params = StdioServerParameters(
                command=cfg.command or "",
                args=cfg.args,
                env=cfg.env_values(),
                cwd=cfg.cwd or self._cwd,
            )
            return stdio_client(params)
        headers = cfg.header_values()
        http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0, read=300.0))
        stack.push_async_callback(http.aclose)
        url = cfg.url or ""
        if cfg.transport == "sse" or self.sse_fallback:
            return sse_client(url, headers=headers)
        return streamable_http_client(url, http_client=http)


async def _list_tools(client: Client) -> list[mcp_types.Tool]:
    tools: list[mcp_types.Tool] = []
    cursor: str | None = None
    for _ in range(_MAX_TOOL_PAGES):
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            break
    return tools


_URL = re.compile(
    r"\b(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*://)(?:[^\s/@'\"<>]*@)?"
    r"(?P<host>[^\s/?#'\"<>]+)[^\s'\"<>]*"
)


def redact_urls(text: str) -> str:
    """``text`` with every URL cut to its scheme, host and port: an MCP server's URL often
    carries its key (``?api_key=``, a secret path, user:password@), and errors land in
    the log, in ``/readyz`` (no auth) and in tool errors the model (so a chat user) sees."""
    return _URL.sub(lambda m: f"{m['scheme']}{m['host']}/...", text)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        return _describe(exc.exceptions[0])
    if isinstance(exc, TimeoutError):
        return "did not start in time"
    if isinstance(exc, MCPError):
        return redact_urls(exc.message)
    if isinstance(exc, ConfigError):
        return str(exc)
    return redact_urls(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)
