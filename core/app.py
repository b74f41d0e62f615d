"""Assembles the core runtime from config: store, bus, tools, context, agent runtime."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from core.agent.config import AgentConfig
from core.agent.context import ContextBuilder
from core.agent.runtime import AgentRuntime
from core.agent.services import TurnServices
from core.agent.status_command import register_status_command
from core.agent.task_complete import task_complete
from core.agent.tokens import for_model
from core.agent.turn import TurnHandler
from core.bus.ephemeral import EphemeralHub
from core.bus.owner import make_owner
from core.bus.sql import SqlBus
from core.bus.wakeups import Wakeups
from core.commands import CommandRouter
from core.events import EventLog
from core.group.config import GroupConfig
from core.group.delegation import Delegation
from core.group.identity import CapabilitySources
from core.group.peer_tasks import GROUP_CHANNEL
from core.group.service import GroupService
from core.hooks import Hooks, HooksConfig, default_sources, session_end_on_new
from core.hooks.transcript import hook_transcripts
from core.mcp import McpConfig
from core.mcp.board import McpBoard, McpPublisher
from core.mcp.commands import register_mcp_commands
from core.mcp.elicit import ElicitationService
from core.mcp.host import McpHost
from core.mcp.manager import McpManager
from core.mcp.trust import trust_verifier
from core.memory import CompactionWorker, MemoryConfig, MemoryFileIndexer, MemoryService
from core.memory.guard import MemoryFilesGuard
from core.memory.semantic import SemanticRecall
from core.memory.tools import memory_tools
from core.messages import utcnow
from core.orchestration.wiring import Orchestration, build_orchestration, orchestration_tools
from core.providers.aliases import ModelAliases
from core.providers.base import Provider
from core.scheduling import (
    SchedulerConfig,
    ScheduleService,
    manage_schedule,
    register_schedule_commands,
)
from core.scheduling.heartbeat import HEARTBEAT_CHANNEL
from core.sessions import SessionStore
from core.skills import SkillsConfig
from core.skills.catalog import SkillCatalog
from core.skills.model import default_skill_sources
from core.skills.tool import skill_tools
from core.store.engine import Store
from core.tasks.agent_files import AgentSource
from core.tasks.agent_tools import ToolVocabulary
from core.tasks.catalog import AgentCatalog, home_agent_sources
from core.tasks.collector import SUBAGENT_CHANNEL
from core.tasks.commands import register_task_commands
from core.tasks.lifecycle_hooks import SubagentHooks
from core.tasks.registry import TaskRegistry
from core.tasks.tools import subagent_tools
from core.tools.approvals import ApprovalService, register_approval_commands
from core.tools.base import Tool, ToolDeps
from core.tools.config import ToolsConfig
from core.tools.exec import ExecRunner, exec_tools
from core.tools.fs import fs_tools
from core.tools.policy import ToolPolicy
from core.tools.registry import ToolRegistry
from core.trust import TRUST_FILE, WorkspaceTrust
from core.workspace import scaffold_workspace

__all__ = ["CORE_CHANNELS", "CoreApp", "build_core"]

CORE_CHANNELS = frozenset({SUBAGENT_CHANNEL, HEARTBEAT_CHANNEL, GROUP_CHANNEL})
"""Outbox channels core delivers itself (subagent answers, heartbeat check-ins, answers
to the tasks group peers delegated)."""


@dataclass(kw_only=True)
class CoreApp:
    """The running core: its stores and bus, the agent runtime, and the schedules."""

    store: Store
    bus: SqlBus
    hub: EphemeralHub
    sessions: SessionStore
    events: EventLog
    commands: CommandRouter
    tool_deps: ToolDeps
    provider: Provider | None
    runtime: AgentRuntime
    schedules: ScheduleService
    approvals: ApprovalService
    exec_runner: ExecRunner
    memory: MemoryService
    memory_files: MemoryFileIndexer
    compaction: CompactionWorker
    mcp: McpManager
    tasks: TaskRegistry
    hooks: Hooks | None = None
    mcp_publisher: McpPublisher | None = None
    """Writes this agent process's MCP servers for the process that answers ``status``."""
    skills: SkillCatalog | None = None
    orchestration: Orchestration | None = None
    """Todos, session modes and memory consolidation (with subagents on)."""
    group: GroupService | None = None
    """Group mode (``[group] enabled``): the roster; the gateway starts the heartbeat."""
    delegation: Delegation | None = None
    """Group mode: tasks delegated to and from peers (run with the agent side)."""

    async def start(self) -> None:
        """Start everything (the one-process gateway): the agent side and the schedules."""
        await self.runtime.start()
        await self.schedules.start()
        await self.start_agent_services()

    async def start_agent(self) -> None:
        """Start the agent side only (the ``agent`` role): claim and run turns."""
        await self.runtime.start()
        await self.start_agent_services()
        self.mcp_publisher = McpPublisher(self.mcp, McpBoard(self.store))
        await self.mcp_publisher.start()

    async def start_agent_services(self) -> None:
        """What runs beside the turns: subagent answers, approvals, memory indexing,
        compaction, MCP servers."""
        await self.tasks.start()
        if self.delegation is not None:
            await self.delegation.start()
        await self.approvals.start()
        await self.memory_files.start()
        if self.memory.semantic is not None:
            await self.memory.semantic.start()
        await self.compaction.start()
        if self.orchestration is not None:
            await self.orchestration.idle.start()
        self.mcp.start()  # eager servers, in the background: a bad one never blocks start
        if self.mcp.host is not None:
            await self.mcp.host.start()  # resume following the MCP tasks left running

    async def stop(self, *, grace: float | None = None) -> None:
        if self.group is not None:
            await self.group.stop()  # first: peers see it left while it still could answer
        if self.orchestration is not None:
            await self.orchestration.idle.stop()
        await self.approvals.stop()
        await self.memory_files.stop()
        if self.memory.semantic is not None:
            await self.memory.semantic.stop()
        if self.schedules.running:
            await self.schedules.stop()
        await self.runtime.stop(grace=grace)
        if self.mcp_publisher is not None:
            await self.mcp_publisher.stop()
        if self.mcp.host is not None:
            await self.mcp.host.stop()
        await self.mcp.stop()
        if self.delegation is not None:
            await self.delegation.stop()
        await self.tasks.stop()
        await self.compaction.stop()
        if self.provider is not None:
            await self.provider.aclose()
        await self.store.close()


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
    extra_tools: Sequence[Tool] = (),
    memory: MemoryConfig | None = None,
    model: str | None = None,
    hooks: HooksConfig | None = None,
    hooks_dir: Path | None = None,
    mcp: McpConfig | None = None,
    home: Path | None = None,
    agent_sources: Sequence[AgentSource] | None = None,
    models: ModelAliases | None = None,
    wakeups: Wakeups | None = None,
    skills: SkillsConfig | None = None,
    group: GroupConfig | None = None,
) -> CoreApp:
    """Open the store (migrating it), scaffold the workspace and wire the runtime.

    Args:
        extra_tools: more tools for the agent (tests, plugins), beside the built-in ones.
        model: the provider's model, for its tokenizer (`core.agent.tokens.for_model`).
        hooks: the ``[hooks]`` section (default: hooks on).
        hooks_dir: the operator's own hook folder (``$FAMILIAR_HOME/hooks``), read beside
            the workspace's ``.github/hooks`` and ``.claude/settings*.json``.
        mcp: MCP servers whose tools the agent may use (servers from files merged in).
        home: FAMILIAR_HOME, whose ``agents/`` holds the user's custom agents and whose
            ``trust.json`` the workspace's hook and MCP files must match (without a
            home, those files are ignored).
        agent_sources: where custom agents are read from, instead of the default places
            (`core.tasks.catalog.home_agent_sources`).
        models: the ``[models]`` table agents' model names resolve through.
        wakeups: wake-ups shared with the other processes of this gateway (roles):
            the bus, the ephemeral hub and the schedules wake and are woken by them.
        skills: the ``[skills]`` section (default: Agent Skills on), read from the
            workspace and the home's ``skills/`` (`core.skills.model.default_skill_sources`).
        group: the ``[group]`` section; enabled, `CoreApp.group` reads the roster.
    """
    await asyncio.to_thread(scaffold_workspace, workspace)
    if store is None:
        store = Store(url=store_url)
        await store.open()
    bus = SqlBus(store=store)
    events = EventLog(store=store)
    sessions = SessionStore(store=store)
    commands = CommandRouter()
    schedules = ScheduleService(
        config=scheduler or SchedulerConfig(),
        store=store,
        bus=bus,
        events=events,
        clock=schedule_clock,
    )
    register_schedule_commands(commands, schedules)
    memory = memory or MemoryConfig()
    semantic = (
        SemanticRecall(store=store, config=memory.embeddings) if memory.embeddings.enabled else None
    )
    memory_service = MemoryService(store=store, config=memory, semantic=semantic)
    memory_guard = MemoryFilesGuard(memory=memory_service, workspace=workspace)
    runner = ExecRunner(tools.exec, guards=[memory_guard])
    approvals = ApprovalService(
        store=store,
        bus=bus,
        runner=runner,
        workspace=workspace,
        timeout=tools.exec.approval_timeout,
    )
    register_approval_commands(commands, approvals)
    skills = skills or SkillsConfig()
    skill_catalog = (
        SkillCatalog(sources=default_skill_sources(workspace, home), config=skills)
        if skills.enabled
        else None
    )
    registry = ToolRegistry(
        tools=[
            *fs_tools(tools, guards=[memory_guard]),
            *exec_tools(tools, runner=runner, approvals=approvals),
            task_complete,
            manage_schedule,
            *memory_tools(),
            *(subagent_tools() if tools.subagents.enabled else ()),
            *(orchestration_tools() if tools.subagents.enabled else ()),
            *(skill_tools(max_bytes=tools.max_file_bytes) if skill_catalog else ()),
            *extra_tools,
        ],
        policy=ToolPolicy(config=tools.policy),
        parallel=tools.parallel_tools,
    )
    mcp_servers = tuple(n for n, s in (mcp or McpConfig()).servers.items() if s.enabled)
    task_registry = TaskRegistry(
        store=store,
        bus=bus,
        events=events,
        sessions=sessions,
        catalog=AgentCatalog(
            sources=home_agent_sources(workspace, home) if agent_sources is None else agent_sources,
            vocabulary=lambda: ToolVocabulary.of(registry.names(), mcp_servers),
            models=models,
        ),
        config=tools.subagents,
    )
    register_task_commands(commands, task_registry)
    orchestration = (
        build_orchestration(
            store=store,
            events=events,
            sessions=sessions,
            memory=memory_service,
            registry=task_registry,
        )
        if tools.subagents.enabled
        else None
    )
    context = ContextBuilder(
        workspace=workspace,
        config=agent.context,
        agent_name=agent.name,
        tokens=for_model(model),
    )
    trust = WorkspaceTrust(record=home / TRUST_FILE if home else None, workspace=workspace)
    hooks = hooks or HooksConfig()
    hook_runner = (
        Hooks(
            config=hooks,
            workspace=workspace,
            sources=default_sources(workspace, hooks_dir),
            trust=trust,
            transcripts=hook_transcripts(home, events, hooks),
            model=model,
        )
        if hooks.enabled
        else None
    )
    owner = make_owner()
    compaction = CompactionWorker(
        store=store,
        sessions=sessions,
        events=events,
        provider=provider,
        context=context,
        config=memory,
        history_budget=agent.context.history_token_budget,
        summary_max_chars=agent.context.summary_max_chars,
        owner=owner,
    )
    mcp_cwd = home or workspace.parent
    mcp = mcp or McpConfig()
    questions = ElicitationService(store=store, bus=bus, timeout=mcp.elicitation_timeout)
    register_mcp_commands(commands, questions)

    def mcp_host() -> McpHost:
        # Here, not at the top: only a gateway with MCP servers loads the SDK.
        from core.mcp.hosting import build_host

        return build_host(
            store=store,
            bus=bus,
            events=events,
            config=mcp,
            manager=lambda: mcp_manager,
            provider=provider,
            model=model,
            questions=questions,
            result_max_chars=tools.subagents.result_max_chars,
        )

    mcp_manager = McpManager(
        config=mcp,
        registry=registry,
        cwd=mcp_cwd,
        verify=trust_verifier(trust, cwd=mcp_cwd),
        host_factory=mcp_host,
    )
    hub = EphemeralHub()
    turn_services = TurnServices(
        store=store,
        inbox=bus,
        hub=hub,
        sessions=sessions,
        events=events,
        provider=provider,
        tools=registry,
        context=context,
        config=agent,
        workspace=workspace,
        commands=commands,
        tool_deps=ToolDeps(
            schedules,
            approvals,
            memory_service,
            task_registry,
            hub,
            *((skill_catalog,) if skill_catalog else ()),
            *(orchestration.tool_services if orchestration else ()),
            *((registry.policy,) if registry.policy is not None else ()),
        ),
        compaction=compaction if memory.compaction == "model" else None,
        notices=approvals,
        hooks=hook_runner,
        profiles=task_registry.profiles,
        before_tools=mcp_manager.first_use,  # servers may come later, with a reload
        skills=skill_catalog,
        modes=orchestration.modes if orchestration else None,
        background=orchestration.waiter if orchestration else None,
        reserved_tools=orchestration.reserved_tools if orchestration else {},
    )
    register_status_command(
        commands,
        sessions=sessions,
        queue=bus,
        provider=lambda: provider.name if provider is not None else None,
    )
    if orchestration is not None:
        orchestration.register_commands(commands, workspace=workspace, policy=registry.policy)
    runtime = AgentRuntime(
        inbox=bus,
        turns=TurnHandler(services=turn_services, owner=owner),
        owner=owner,
        config=agent,
        commands=commands,
        sessions=sessions,
    )
    if hook_runner is not None:
        session_end_on_new(commands, hook_runner, workspace, events)
        task_registry.add_lifecycle(
            SubagentHooks(hooks=hook_runner, workspace=workspace, events=events)
        )
    if wakeups is not None:
        bus.connect(wakeups)
        turn_services.hub.connect(wakeups)
        schedules.on_change = lambda: wakeups.announce(("schedules", ""))
    group_service = (
        GroupService(
            store=store,
            url=store_url,
            config=group,
            name=group.member_name(agent.name),
            workspace=workspace,
            sources=CapabilitySources(
                tools=registry.names,
                agents=lambda: _names(task_registry.catalog.agents()),
                skills=(lambda: _names(skill_catalog.skills())) if skill_catalog else None,
            ),
        )
        if group is not None and group.enabled
        else None
    )
    delegation = None
    if group_service is not None:
        delegation = Delegation(
            store=store, bus=bus, events=events, group=group_service, subagents=tools.subagents
        )
        turn_services.tool_deps.add(delegation.peers)
    return CoreApp(
        store=store,
        bus=bus,
        hub=turn_services.hub,
        sessions=sessions,
        events=events,
        commands=commands,
        tool_deps=turn_services.tool_deps,
        provider=provider,
        runtime=runtime,
        schedules=schedules,
        approvals=approvals,
        exec_runner=runner,
        memory=memory_service,
        memory_files=MemoryFileIndexer(store=store, workspace=workspace, config=memory),
        compaction=compaction,
        hooks=hook_runner,
        mcp=mcp_manager,
        tasks=task_registry,
        skills=skill_catalog,
        orchestration=orchestration,
        group=group_service,
        delegation=delegation,
    )


async def _names(mapping: Awaitable[Mapping[str, object]]) -> list[str]:
    return list(await mapping)
