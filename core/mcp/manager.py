"""McpManager: every configured MCP server's connection, and its tools in the tool registry."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from core.errors import ConfigError
from core.tools.registry import ToolRegistry

from .config import McpConfig, McpServerConfig
from .state import ServerState

if TYPE_CHECKING:
    from .connection import McpConnection
    from .host import McpHost

__all__ = ["McpManager", "ServerStatus"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True, slots=True)
class ServerStatus:
    """What ``familiar mcp list``, ``doctor`` and ``/readyz`` say about one server."""

    name: str
    source: str
    transport: str
    enabled: bool
    state: str
    error: str | None
    tools: tuple[str, ...]
    """The public names (``mcp__<server>__<tool>``) registered for it."""
    starts: int
    stderr: str | None = None
    """The end of a stdio server's stderr when its process failed (secrets masked)."""
    exit_status: int | None = None
    """How that process ended (negative: killed by that signal)."""
    task_support: dict[str, str] = field(default_factory=dict)
    """The public names of its tools that run as MCP tasks, and their ``taskSupport``
    (``required``, or ``optional`` where the server's ``tasks = "optional"``)."""


class McpManager:
    """Connects the enabled servers in the background and keeps their tools registered.

    Starting never blocks and never fails: a server that does not start is reported
    (``status()``) and retried with backoff, while the other tools work.

    Args:
        config: the ``[mcp]`` section, its ``servers`` already merged with imported ones.
        registry: where the servers' tools are registered (and unregistered).
        cwd: a stdio server's working directory unless it names one (``$FAMILIAR_HOME``
            in the gateway; never the workspace, which the agent writes).
        verify: why a server may not start now, or None (asked before every start:
            `core.mcp.trust.trust_verifier`); blocking, so it runs in a thread.
        host_factory: makes the `McpHost` that answers the servers' questions, sampling
            requests and task tools (`core.mcp.hosting`); called with the first
            connection, so a gateway without servers never builds it. None: refused.
    """

    def __init__(
        self,
        *,
        config: McpConfig,
        registry: ToolRegistry,
        cwd: Path,
        verify: Callable[[McpServerConfig], str | None] | None = None,
        host_factory: Callable[[], McpHost] | None = None,
    ) -> None:
        self.config = config
        self._host_factory = host_factory
        self._registry = registry
        self._cwd = cwd
        self._verify = verify
        self._listeners: list[Callable[[], None]] = []
        self._host: McpHost | None = None
        self.connections: dict[str, McpConnection] = {
            name: self._connection(name, server) for name, server in config.servers.items()
        }
        self._registered: dict[str, list[str]] = {}
        self._first_use: asyncio.Task[None] | None = None
        self._every = False
        """Every enabled server was started (not only the eager ones)."""
        self._task_support: dict[str, dict[str, str]] = {}

    @property
    def host(self) -> McpHost | None:
        """The host of the connections, once one was made."""
        return self._host

    def _connection(self, name: str, server: McpServerConfig) -> McpConnection:
        # The mcp SDK (with starlette, uvicorn, cryptography...) costs every process that
        # imports it ~0.5 s and tens of MiB: only a gateway with servers does.
        from .connection import McpConnection

        if self._host is None and self._host_factory is not None:
            self._host = self._host_factory()
        config = self.config
        return McpConnection(
            name=name,
            config=server,
            cwd=self._cwd,
            connect_timeout=config.connect_timeout,
            backoff=config.restart_backoff,
            max_backoff=config.max_restart_backoff,
            on_tools=self._register,
            verify=self._verify,
            passthrough=config.env_passthrough,
            on_change=lambda _: self._changed(),
            host=self._host,
        )

    def on_change(self, listener: Callable[[], None]) -> None:
        """Call ``listener`` whenever a server's state, error or tools change, and when
        servers are added or removed."""
        self._listeners.append(listener)

    def _changed(self) -> None:
        for listener in self._listeners:
            listener()

    async def apply(self, config: McpConfig) -> None:
        """Take a new ``[mcp]`` section (its files were reloaded): an added server starts
        when the others would have, a removed one stops, a changed one restarts; one log
        line each. Connection settings (timeouts, backoff) apply to servers started now."""
        old = self.connections
        kept = {n: c for n, c in old.items() if config.servers.get(n) == c.config}
        replaced = {n: c.started for n, c in old.items() if n not in kept}
        for name in replaced:
            await old[name].stop()
            self._unregister(name)
            if (now := config.servers.get(name)) is not None:
                log.info("mcp server %s changed (%s): restarting", name, now.source)
            else:
                log.info("mcp server %s removed (was in %s)", name, old[name].config.source)
        self.config = config
        connections: dict[str, McpConnection] = {}
        for name, server in config.servers.items():
            if name not in old:
                log.info("mcp server %s added (%s)", name, server.source)
            connections[name] = kept.get(name) or self._connection(name, server)
        self.connections = connections
        for name, connection in connections.items():
            lazy = not (replaced.get(name, False) or connection.config.eager or self._every)
            if name not in kept and connection.config.enabled and not lazy:
                connection.start()
        if replaced or len(connections) > len(kept):
            self._changed()

    def start(self, *, every: bool = False) -> None:
        """Start connecting (in the background) the enabled servers marked ``eager``, or
        ``every`` enabled one; the others start at :meth:`first_use`."""
        self._every = self._every or every
        for connection in self.connections.values():
            if connection.config.enabled and (every or connection.config.eager):
                connection.start()

    async def first_use(self) -> None:
        """Before a turn offers tools: start the lazy servers the first time, and wait
        (at most ``first_turn_wait``) for them to list their tools. Concurrent first
        turns share the one wait; later turns return at once."""
        if self._first_use is None:
            self.start(every=True)
            self._first_use = asyncio.create_task(
                self.wait_settled(self.config.first_turn_wait), name="mcp:first-use"
            )
        if not self._first_use.done():
            await asyncio.shield(self._first_use)

    async def stop(self) -> None:
        """Close every connection (stdio servers are terminated) and drop their tools."""
        if self._first_use is not None:
            self._first_use.cancel()
        await asyncio.gather(*(c.stop() for c in self.connections.values()))
        for name in list(self._registered):
            self._unregister(name)

    async def wait_settled(self, timeout: float) -> None:
        """Wait (at most ``timeout``) until every started server first connected or failed."""
        await asyncio.gather(
            *(c.wait_settled(timeout) for c in self.connections.values() if c.started)
        )

    def status(self) -> list[ServerStatus]:
        """Every configured server, by name."""
        return [
            ServerStatus(
                name=name,
                source=c.config.source,
                transport="sse" if c.sse_fallback else c.config.transport,
                enabled=c.config.enabled,
                state=c.state.value if c.config.enabled else "disabled",
                error=c.error,
                tools=tuple(self._registered.get(name, ())),
                starts=c.starts,
                stderr=c.stderr,
                exit_status=c.exit_status,
                task_support=dict(self._task_support.get(name, {})),
            )
            for name, c in sorted(self.connections.items())
        ]

    def failing(self) -> list[ServerStatus]:
        """The enabled servers that are not connected now."""
        return [s for s in self.status() if s.enabled and s.state == ServerState.FAILED.value]

    def _unregister(self, server: str) -> None:
        self._task_support.pop(server, None)
        for name in self._registered.pop(server, []):
            self._registry.unregister(name)

    def _register(self, connection: McpConnection) -> None:
        from .tools import McpTool

        self._unregister(connection.name)
        names: list[str] = []
        support: dict[str, str] = {}
        for remote in connection.tools:
            tool = McpTool(connection=connection, tool=remote, max_output=self.config.max_output)
            try:
                self._registry.register(tool)
            except ConfigError:
                log.warning(
                    "mcp server %s: tool %s skipped, the name %s is taken",
                    connection.name,
                    remote.name,
                    tool.name,
                )
                continue
            names.append(tool.name)
            if tool.as_task:
                support[tool.name] = tool.task_support
        self._registered[connection.name] = names
        self._task_support[connection.name] = support
        self._changed()
