"""What one turn works with: storage, the model, tools and where deltas go."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from sqlalchemy import Connection

from core.agent.agents_section import AgentListing
from core.agent.config import AgentConfig
from core.agent.context import ContextBuilder
from core.bus.ephemeral import EphemeralHub
from core.bus.sql import SqlBus
from core.commands import CommandRouter
from core.events import EventLog
from core.hooks import Hooks
from core.providers.base import Provider
from core.sessions import SessionStore
from core.skills.catalog import SkillCatalog
from core.store.engine import Store
from core.tools.base import ToolContext, ToolDeps
from core.tools.lineage import Lineage
from core.tools.registry import ToolRegistry

__all__ = [
    "NO_PROVIDER_HINT",
    "BackgroundWork",
    "CompactionQueue",
    "ReplyNotices",
    "SessionModesView",
    "TurnProfile",
    "TurnProfiles",
    "TurnServices",
]

NO_PROVIDER_HINT = (
    "No LLM provider is configured: set OPENAI_API_KEY or ANTHROPIC_API_KEY, run Ollama on "
    "127.0.0.1:11434, or set [provider] kind/base_url/model in config.toml, then restart."
)


class CompactionQueue(Protocol):
    """Where a turn asks for its session's overflowing history to be summarised."""

    def request_in(self, conn: Connection, *, key: str, epoch: int, upto: int) -> None:
        """Record the request inside the turn's settling transaction (durable with it)."""
        ...

    def wake(self) -> None:
        """Tell the worker a request was committed (after the settling commit)."""
        ...


class ReplyNotices(Protocol):
    """Text the system appends to a final reply (e.g. commands awaiting approval)."""

    async def notice(self, message_id: str) -> str: ...


class SessionModesView(Protocol):
    """A session's standing modes, as a turn reads them."""

    def autopilot_in(self, conn: Connection, session_key: str) -> bool:
        """Whether every message of the session runs in autopilot (``/autopilot on``),
        read inside the transaction that begins the turn."""
        ...


class BackgroundWork(Protocol):
    """The background agents a message started, which its autopilot run waits for."""

    async def settle(self, ctx: ToolContext) -> str | None:
        """Wait until at least one of the message's running background agents is done.

        Returns:
            What finished, as a message for the model; None when none runs.
        """
        ...


@dataclass(frozen=True, kw_only=True)
class TurnProfile:
    """Who answers in a session other than the main agent (a subagent), and how.

    Attributes:
        agent_type: the policy's agent type (``tools.policy.per_agent``).
        depth: 1 for a child of the main agent, n further down.
        tools: the agent's own tool list (names or patterns); None: every tool.
        model: overrides the provider's model.
        instructions: system prompt sections for this agent (its instructions, a
            parent's read-only context, hook-provided context), in order.
        read_scopes: memory scopes it may read but not write.
        agents: the agent catalog it may start agents from, listed in its system
            prompt when it has custom agents (`core.agent.agents_section`).
        refuse: when set, the message is answered with this error and no model call
            (e.g. the agent was cancelled).
        lineage: a subagent's chain up to the session that started it (whose channel
            rules and agents' tool lists bind it too).
        skills: the Agent Skills it may see and load (a custom agent's ``skills``);
            None: every skill.
    """

    agent_type: str = "main"
    depth: int = 0
    tools: tuple[str, ...] | None = None
    model: str | None = None
    instructions: tuple[str, ...] = ()
    read_scopes: tuple[str, ...] = ()
    agents: tuple[AgentListing, ...] = ()
    refuse: str | None = None
    lineage: Lineage | None = None
    skills: tuple[str, ...] | None = None


class TurnProfiles(Protocol):
    """Looks up the profile of a session's agent (the TaskRegistry for ``subagent:``)."""

    async def profile(self, session_key: str) -> TurnProfile | None:
        """The session's profile; None: the main agent with no custom agents."""
        ...


@dataclass(kw_only=True)
class TurnServices:
    """Everything `TurnHandler` uses, and only it (the runtime and others take less).

    A subagent's turns will get their own instance: another toolset, another context.
    """

    store: Store
    inbox: SqlBus
    hub: EphemeralHub
    sessions: SessionStore
    events: EventLog
    provider: Provider | None
    tools: ToolRegistry
    context: ContextBuilder
    config: AgentConfig
    workspace: Path
    commands: CommandRouter
    tool_deps: ToolDeps = field(default_factory=ToolDeps)
    notices: ReplyNotices | None = None
    compaction: CompactionQueue | None = None
    """Summarises history that left the window after the reply; None: the turn folds
    it extractively itself."""
    no_provider_hint: str = NO_PROVIDER_HINT
    hooks: Hooks | None = None
    """Lifecycle hooks (``[hooks]``); None: none run, at no cost."""
    profiles: TurnProfiles | None = None
    """Subagent sessions' agent type, tools, depth and instructions."""
    before_tools: Callable[[], Awaitable[None]] | None = None
    """Awaited before a turn lists its tools (MCP servers start on first use)."""
    skills: SkillCatalog | None = None
    """Agent Skills, listed in the prompt and loaded with the ``skill`` tool; None: off."""
    modes: SessionModesView | None = None
    """Sessions' standing modes (``/autopilot``); None: only a message's own flag."""
    background: BackgroundWork | None = None
    """What an autopilot message waits for before it ends; None: it never waits."""
    reserved_tools: dict[str, str] = field(default_factory=dict)
    """Tools offered to one agent type only, by tool name (``memory_consolidate``:
    ``rem-agent``); the tool itself refuses every other caller too."""
