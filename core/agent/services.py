"""The services a turn needs, bundled so constructors stay small."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.agent.commands import CommandRouter
from core.agent.config import AgentConfig
from core.agent.context import ContextBuilder
from core.bus.ephemeral import EphemeralHub
from core.bus.sql import SqlBus
from core.events import EventLog
from core.providers.base import Provider
from core.sessions import SessionStore
from core.store.engine import Store
from core.tools.registry import ToolRegistry

__all__ = ["AgentServices"]

NO_PROVIDER_HINT = (
    "No LLM provider is configured: set OPENAI_API_KEY or ANTHROPIC_API_KEY, run Ollama on "
    "127.0.0.1:11434, or set [provider] kind/base_url/model in config.toml, then restart."
)


@dataclass(kw_only=True)
class AgentServices:
    """Everything the agent runtime works with (wired by the gateway or a test)."""

    store: Store
    bus: SqlBus
    hub: EphemeralHub
    sessions: SessionStore
    events: EventLog
    provider: Provider | None
    tools: ToolRegistry
    context: ContextBuilder
    config: AgentConfig
    workspace: Path
    commands: CommandRouter = field(default_factory=CommandRouter)
    tool_extras: dict[str, Any] = field(default_factory=dict)
    """Services tools may use (scheduler, task registry), by name."""
    no_provider_hint: str = NO_PROVIDER_HINT
