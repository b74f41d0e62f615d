"""Assembles the core runtime from config: store, bus, tools, context, agent runtime."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from core.agent.commands import CommandRouter
from core.agent.config import AgentConfig
from core.agent.context import ContextBuilder
from core.agent.runtime import AgentRuntime
from core.agent.services import AgentServices
from core.agent.task_complete import task_complete
from core.bus.ephemeral import EphemeralHub
from core.bus.sql import SqlBus
from core.events import EventLog
from core.messages import utcnow
from core.providers.base import Provider
from core.schedule_commands import register_schedule_commands
from core.schedule_tool import manage_schedule
from core.scheduler import SchedulerConfig, ScheduleService
from core.sessions import SessionStore
from core.store.engine import Store
from core.tools.config import ToolsConfig
from core.tools.exec import exec_tools
from core.tools.fs import fs_tools
from core.tools.policy import ToolPolicy
from core.tools.registry import ToolRegistry
from core.workspace import scaffold_workspace

__all__ = ["CoreApp", "build_core"]


@dataclass(kw_only=True)
class CoreApp:
    """The running core: services plus the agent runtime that works on them."""

    services: AgentServices
    runtime: AgentRuntime
    schedules: ScheduleService

    @property
    def store(self) -> Store:
        return self.services.store

    @property
    def bus(self) -> SqlBus:
        return self.services.bus

    async def start(self) -> None:
        await self.runtime.start()
        await self.schedules.start()

    async def stop(self, *, grace: float | None = None) -> None:
        if self.schedules.running:
            await self.schedules.stop()
        await self.runtime.stop(grace=grace)
        if self.services.provider is not None:
            await self.services.provider.aclose()
        await self.services.store.close()


async def build_core(
    *,
    store_url: str,
    workspace: Path,
    agent: AgentConfig,
    tools: ToolsConfig,
    provider: Provider | None,
    scheduler: SchedulerConfig | None = None,
    store: Store | None = None,
    schedule_clock: Callable[[], datetime] = utcnow,
) -> CoreApp:
    """Open the store (migrating it), scaffold the workspace and wire the runtime."""
    await asyncio.to_thread(scaffold_workspace, workspace)
    if store is None:
        store = Store(url=store_url)
        await store.open()
    registry = ToolRegistry(
        tools=[*fs_tools(tools), *exec_tools(tools), task_complete, manage_schedule],
        policy=ToolPolicy(config=tools.policy),
    )
    services = AgentServices(
        store=store,
        bus=SqlBus(store=store),
        hub=EphemeralHub(),
        sessions=SessionStore(store=store),
        events=EventLog(store=store),
        provider=provider,
        tools=registry,
        context=ContextBuilder(workspace=workspace, config=agent.context, agent_name=agent.name),
        config=agent,
        workspace=workspace,
        commands=CommandRouter(),
    )
    schedules = ScheduleService(
        config=scheduler or SchedulerConfig(),
        store=store,
        bus=services.bus,
        events=services.events,
        clock=schedule_clock,
    )
    register_schedule_commands(services.commands, schedules)
    services.tool_extras["scheduler"] = schedules
    return CoreApp(services=services, runtime=AgentRuntime(services=services), schedules=schedules)
