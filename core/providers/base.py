"""The Provider protocol and the types it speaks: one model interface for every LLM."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "ChatMessage",
    "ChatRequest",
    "Completion",
    "Provider",
    "StreamEvent",
    "TextDelta",
    "ToolCall",
    "ToolSpec",
    "Usage",
]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True)


class ToolCall(_Frozen):
    """A tool call requested by the model. ``arguments`` is already parsed JSON."""

    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class ChatMessage(_Frozen):
    """One message of the conversation sent to the model (OpenAI-like roles)."""

    role: Literal["system", "user", "assistant", "tool"]
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    """For role ``tool``: the id of the call this result answers."""
    name: str | None = None
    """For role ``tool``: the tool's name."""


class ToolSpec(_Frozen):
    """A tool as the model sees it: name, description, JSON schema of the arguments."""

    name: str
    description: str
    parameters: dict[str, Any]


class ChatRequest(_Frozen):
    """Everything a provider needs for one LLM call."""

    system: str
    messages: tuple[ChatMessage, ...]
    tools: tuple[ToolSpec, ...] = ()
    model: str | None = None
    """Overrides the provider's configured model when set."""
    max_tokens: int | None = None
    temperature: float | None = None


class Usage(_Frozen):
    input_tokens: int = 0
    output_tokens: int = 0


class TextDelta(_Frozen):
    """A piece of assistant text, streamed."""

    type: Literal["delta"] = "delta"
    text: str


class Completion(_Frozen):
    """The finished answer of one LLM call."""

    type: Literal["completion"] = "completion"
    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    finish_reason: str | None = None
    usage: Usage = Field(default_factory=Usage)


StreamEvent = TextDelta | Completion


@runtime_checkable
class Provider(Protocol):
    """An LLM. ``stream`` yields text deltas and ends with exactly one ``Completion``.

    Failures raise :class:`core.errors.ProviderError` subclasses.
    """

    name: str

    def stream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        """Stream one LLM call."""
        ...

    async def complete(self, request: ChatRequest) -> Completion:
        """One LLM call, without streaming."""
        ...

    async def aclose(self) -> None:
        """Release connections."""
        ...
