"""Picks an LLM provider when none is configured: API keys in the environment, or local Ollama."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass

import aiohttp
from pydantic import SecretStr

from core.providers.config import ProviderConfig

__all__ = ["OLLAMA_URL", "ProviderChoice", "choose_provider", "detect_provider", "probe_ollama"]

log = logging.getLogger(__name__)

OLLAMA_URL = "http://127.0.0.1:11434"
"""Where a local Ollama listens by default."""
_PROBE_SECONDS = 0.5


@dataclass(frozen=True, slots=True)
class ProviderChoice:
    """The provider config to build and why it was chosen (never contains the key)."""

    config: ProviderConfig
    source: str
    """``config``, ``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY`` or ``ollama``."""

    def as_json(self) -> dict[str, str | None]:
        """``{"kind", "model", "base_url"}`` as ``/v1/status`` reports it."""
        return {
            "kind": self.config.kind,
            "model": self.config.effective_model,
            "base_url": self.config.effective_base_url,
        }


async def probe_ollama(url: str = OLLAMA_URL) -> str | None:
    """The first model a local Ollama lists at ``GET <url>/api/tags``, or None.

    None when nothing answers within half a second, the answer is not Ollama's,
    or no model is pulled.
    """
    try:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=_PROBE_SECONDS)) as http,
            http.get(f"{url.rstrip('/')}/api/tags") as response,
        ):
            if response.status != 200:
                return None
            body = await response.json(content_type=None)
    except (aiohttp.ClientError, TimeoutError, ValueError):
        return None
    models = body.get("models") if isinstance(body, dict) else None
    if not isinstance(models, list) or not models or not isinstance(models[0], dict):
        return None
    name = models[0].get("name") or models[0].get("model")
    return str(name) if name else None


async def detect_provider(
    base: ProviderConfig, env: Mapping[str, str], *, ollama_url: str = OLLAMA_URL
) -> ProviderChoice | None:
    """Auto-detect a provider for an unset ``provider.kind``.

    In order: ``OPENAI_API_KEY`` -> openai, ``ANTHROPIC_API_KEY`` -> anthropic, a local
    Ollama with a model -> openai on ``<ollama>/v1``. Other settings of ``base``
    (timeouts, retries) are kept.
    """
    for variable, kind in (("OPENAI_API_KEY", "openai"), ("ANTHROPIC_API_KEY", "anthropic")):
        key = env.get(variable, "").strip()
        if key:
            config = base.model_copy(update={"kind": kind, "api_key": SecretStr(key)})
            return ProviderChoice(ProviderConfig.model_validate(config.model_dump()), variable)
    model = await probe_ollama(ollama_url)
    if model is not None:
        update = {"kind": "openai", "base_url": f"{ollama_url.rstrip('/')}/v1", "model": model}
        config = ProviderConfig.model_validate({**base.model_dump(), **update})
        return ProviderChoice(config, "ollama")
    return None


async def choose_provider(
    config: ProviderConfig, env: Mapping[str, str], *, ollama_url: str = OLLAMA_URL
) -> ProviderChoice | None:
    """The configured provider when ``provider.kind`` is set, else auto-detection."""
    if config.kind is not None:
        return ProviderChoice(config, "config")
    choice = await detect_provider(config, env, ollama_url=ollama_url)
    if choice is None:
        log.warning(
            "no LLM provider configured or detected: replies will explain how to set one up"
        )
    return choice
