"""McpHostService: a server's requests answered in the conversation that owns the call.

Built on the first MCP connection (`McpManager` ``host_factory``): a gateway without
MCP servers never imports the SDK for it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import mcp_types

from core.bus.sql import SqlBus
from core.events import EventLog
from core.providers.base import Provider
from core.store.engine import Store
from core.tools.base import ToolContext

from .bridge import McpTaskBridge
from .config import McpConfig, McpServerConfig
from .connection import McpConnection
from .elicit import ElicitationService, Question
from .host import CallOwner
from .manager import McpManager
from .sampling import SamplingService
from .tools import McpTool

__all__ = ["McpHostService", "build_host"]


class McpHostService:
    """The `McpHost` of the gateway's connections: questions and sampling requests go
    to the session of the call, or of the task they belong to; task tools run through
    the bridge, and task progress updates their records."""

    def __init__(
        self,
        *,
        bridge: McpTaskBridge,
        elicitations: ElicitationService,
        sampling: SamplingService,
    ) -> None:
        self.bridge = bridge
        self.elicitations = elicitations
        self.sampling = sampling

    async def start(self) -> None:
        await self.bridge.start()

    async def stop(self) -> None:
        await self.bridge.stop()

    async def call_as_task(self, ctx: ToolContext, tool: McpTool, arguments: dict[str, Any]) -> str:
        return await self.bridge.call_as_task(ctx, tool, arguments)

    async def _owner(
        self, server: str, owner: CallOwner | None, task: str | None
    ) -> tuple[CallOwner | None, str | None]:
        if task is None:
            return owner, None
        found = await self.bridge.owner_of(server, task)
        return found if found is not None else (None, None)

    async def elicit(
        self, server: str, owner: CallOwner | None, task: str | None, params: Any
    ) -> mcp_types.ElicitResult | mcp_types.ErrorData:
        found, task_id = await self._owner(server, owner, task)
        if isinstance(params, mcp_types.ElicitRequestURLParams):
            asked = Question(message=params.message, url=params.url)
        else:
            schema = params.requested_schema
            asked = Question(message=params.message, requested_schema=dict(schema))
        answer = await self.elicitations.ask(server, found, task_id, asked)
        if answer.action == "refused":
            return mcp_types.ErrorData(
                code=mcp_types.INVALID_REQUEST, message=answer.reason or "refused"
            )
        action = "accept" if answer.action == "accept" else answer.action
        return mcp_types.ElicitResult(action=action, content=answer.content)

    async def sample(
        self,
        server: str,
        owner: CallOwner | None,
        task: str | None,
        params: mcp_types.CreateMessageRequestParams,
    ) -> mcp_types.CreateMessageResult | mcp_types.ErrorData:
        found, _ = await self._owner(server, owner, task)
        return await self.sampling.sample(server, found, params)

    async def progress(self, server: str, notification: mcp_types.ProgressNotification) -> None:
        await self.bridge.progress(server, notification)


def build_host(
    *,
    store: Store,
    bus: SqlBus,
    events: EventLog,
    config: McpConfig,
    manager: Callable[[], McpManager],
    provider: Provider | None,
    model: str | None,
    questions: ElicitationService,
    result_max_chars: int,
) -> McpHostService:
    """The host of a gateway's MCP connections (``manager``: the manager, once made)."""

    def connection(name: str) -> McpConnection | None:
        return manager().connections.get(name)

    def server(name: str) -> McpServerConfig | None:
        found = manager().connections.get(name)
        return found.config if found is not None else None

    bridge = McpTaskBridge(
        store=store,
        bus=bus,
        events=events,
        connections=connection,
        max_output=config.max_output,
        result_max_chars=result_max_chars,
    )
    sampling = SamplingService(
        provider=provider,
        events=events,
        servers=server,
        max_tokens=config.sampling_max_tokens,
        model=model,
    )
    return McpHostService(bridge=bridge, elicitations=questions, sampling=sampling)
