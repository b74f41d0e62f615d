"""Configuration of the agent runtime and loop."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from core.agent.context import ContextConfig

__all__ = ["AgentConfig"]


class AgentConfig(BaseModel):
    """How the agent runs: limits, concurrency, leases."""

    model_config = ConfigDict(extra="forbid")

    name: str = "familiar"
    """The assistant's name, shown to the model in the runtime block of its system prompt."""
    max_iterations: int = Field(default=20, ge=1, le=500)
    """LLM calls per message before the loop stops."""
    max_continuations: int = Field(default=5, ge=0, le=100)
    """Nudges per autopilot message until the model calls task_complete."""
    max_concurrent_sessions: int = Field(default=32, ge=1, le=100_000)
    """Sessions answered at the same time (one message per session at a time)."""
    max_attempts: int = Field(default=5, ge=1, le=100)
    """Deliveries of one message (crashes, kills) before it is answered with an error."""
    lease_seconds: float = Field(default=60.0, ge=5.0)
    """A claimed message becomes claimable again this long after its worker died."""
    poll_interval: float = Field(default=1.0, gt=0)
    """Fallback check for work published by other processes or expired leases."""
    stream: bool = True
    """Stream the model's answers (channels show them as they are written); false makes one
    whole call per step."""
    shutdown_grace: float = Field(default=10.0, ge=0)
    """On stop, running turns get this long to finish; the rest stay claimable."""
    context: ContextConfig = Field(default_factory=ContextConfig)
