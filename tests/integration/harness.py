"""A core runtime on a real store, driven by tests: publish, wait for the final reply."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

from core.agent.config import AgentConfig
from core.app import CoreApp, build_core
from core.messages import Delivery, InboundMessage, OutboundMessage, utcnow
from core.providers.base import Provider
from core.scheduling import SchedulerConfig
from core.tools.base import Tool
from core.tools.config import ToolsConfig


def inbound(session: str, text: str, **kw: object) -> InboundMessage:
    kw.setdefault("approver", "test-user")  # as a channel that authenticated its user
    return InboundMessage(
        session_key=session, text=text, delivery=Delivery(channel="test", chat_id=session), **kw
    )  # type: ignore[arg-type]


class Replies:
    """Collects final replies as the 'test' channel's delivery, keyed by inbound id."""

    def __init__(self, app: CoreApp) -> None:
        self._app = app
        self.by_inbound: dict[str, OutboundMessage] = {}
        self.arrived_at: dict[str, float] = {}
        """``time.perf_counter()`` when each reply was delivered, by inbound id."""
        self._arrived = asyncio.Condition()

    async def pump(self) -> None:
        bus = self._app.bus
        while True:
            for due in await bus.due_outbound("test", limit=1000):
                if await bus.mark_delivered(due.message.id):
                    async with self._arrived:
                        self.by_inbound[due.message.inbound_id] = due.message
                        self.arrived_at[due.message.inbound_id] = time.perf_counter()
                        self._arrived.notify_all()
            await bus.wait_outbound("test", 0.5)

    async def wait(self, ids: list[str], timeout: float = 60) -> list[OutboundMessage]:
        async with asyncio.timeout(timeout), self._arrived:
            await self._arrived.wait_for(lambda: all(i in self.by_inbound for i in ids))
        return [self.by_inbound[i] for i in ids]


@asynccontextmanager
async def running_core(
    *,
    store_url: str,
    workspace: Path,
    provider: Provider | None,
    agent: AgentConfig | None = None,
    tools: ToolsConfig | None = None,
    scheduler: SchedulerConfig | None = None,
    schedule_clock: Callable[[], datetime] = utcnow,
    extra_tools: Sequence[Tool] = (),
    **core: Any,
) -> AsyncIterator[tuple[CoreApp, Replies]]:
    """A started core (``core``: more `build_core` arguments) and its replies."""
    app = await build_core(
        **core,
        extra_tools=extra_tools,
        store_url=store_url,
        workspace=workspace,
        agent=agent or AgentConfig(),
        tools=tools or ToolsConfig(),
        provider=provider,
        scheduler=scheduler,
        schedule_clock=schedule_clock,
    )
    replies = Replies(app)
    pump = asyncio.create_task(replies.pump())
    await app.start()
    try:
        yield app, replies
    finally:
        pump.cancel()
        await asyncio.gather(pump, return_exceptions=True)
        await app.stop(grace=1)
