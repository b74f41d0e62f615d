"""LLM providers: the Provider protocol, OpenAI-compatible, Anthropic and scripted models."""

from core.providers.anthropic import AnthropicProvider
from core.providers.base import (
    ChatMessage,
    ChatRequest,
    Completion,
    Provider,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolSpec,
    Usage,
)
from core.providers.config import ProviderConfig
from core.providers.factory import build_provider
from core.providers.openai import OpenAIProvider
from core.providers.retry import RetryPolicy
from core.providers.scripted import FunctionProvider, ScriptedProvider

__all__ = [
    "AnthropicProvider",
    "ChatMessage",
    "ChatRequest",
    "Completion",
    "FunctionProvider",
    "OpenAIProvider",
    "Provider",
    "ProviderConfig",
    "RetryPolicy",
    "ScriptedProvider",
    "StreamEvent",
    "TextDelta",
    "ToolCall",
    "ToolSpec",
    "Usage",
    "build_provider",
]
