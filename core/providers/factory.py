"""build_provider: the one place a ProviderConfig becomes a Provider."""

from __future__ import annotations

from core.errors import ConfigError
from core.providers.anthropic import AnthropicProvider
from core.providers.base import Provider
from core.providers.config import ProviderConfig
from core.providers.openai import OpenAIProvider
from core.providers.scripted import ScriptedProvider

__all__ = ["build_provider"]


def build_provider(config: ProviderConfig) -> Provider | None:
    """The provider ``config`` describes, or None when ``provider.kind`` is unset.

    Raises:
        ConfigError: the configuration is incomplete (the message names the key),
            e.g. a self-hosted OpenAI-compatible server without ``provider.model``,
            or the vendor's own API without ``provider.api_key``.
    """
    if config.kind is None:
        return None
    if config.kind == "scripted":
        return ScriptedProvider(replies=config.script)
    if config.uses_vendor_endpoint and config.api_key is None:
        raise ConfigError(
            f"provider.api_key is required for {config.effective_base_url} "
            f"(or set provider.base_url to a local {config.kind}-compatible server)",
            key="provider.api_key",
        )
    if config.kind == "openai":
        return OpenAIProvider(config=config)
    return AnthropicProvider(config=config)
