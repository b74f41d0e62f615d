"""ProviderConfig: which LLM to call, where, and how patiently."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, SecretStr, field_validator

__all__ = ["DEFAULT_BASE_URLS", "DEFAULT_MODELS", "ProviderConfig", "ProviderKind"]

ProviderKind = Literal["openai", "anthropic", "scripted"]

DEFAULT_BASE_URLS: dict[str, str] = {
    "openai": "https://api.openai.com/v1",
    "anthropic": "https://api.anthropic.com",
}
"""The vendor's own endpoint, used when ``base_url`` is not set."""

DEFAULT_MODELS: dict[str, str] = {
    "openai": "gpt-4o-mini",
    "anthropic": "claude-sonnet-4-5",
}
"""The model used when ``model`` is not set and the vendor's own endpoint is used."""


class ProviderConfig(BaseModel):
    """The ``[provider]`` section: kind, endpoint, credentials, model, timeouts, retries.

    Attributes:
        kind: ``openai`` (any OpenAI-compatible server), ``anthropic``, ``scripted``
            (in-process, no network) or ``None`` (no provider configured).
        base_url: endpoint root; defaults per kind (see ``DEFAULT_BASE_URLS``). For
            OpenAI-compatible servers it includes the ``/v1`` suffix.
        api_key: sent as a bearer token (openai) or ``x-api-key`` (anthropic) when set.
        model: model name; defaults per kind only on the vendor's own endpoint.
        timeout_connect: seconds to establish a connection.
        timeout_read: the longest gap, in seconds, between two chunks of a response.
        timeout_total: the longest a whole call may take, retries included.
        max_retries: retries after the first attempt (429, 5xx, connect errors, timeouts).
        retry_backoff: base seconds of the exponential backoff (with jitter).
        max_tokens: default output token cap; a request may override it.
        temperature: default sampling temperature; a request may override it.
        script: for ``scripted``: the replies, in order (then it echoes).
    """

    model_config = ConfigDict(extra="forbid")

    kind: ProviderKind | None = None
    base_url: str | None = None
    api_key: SecretStr | None = None
    model: str | None = None
    timeout_connect: float = 10.0
    timeout_read: float = 120.0
    timeout_total: float = 600.0
    max_retries: int = 3
    retry_backoff: float = 1.0
    max_tokens: int | None = None
    temperature: float | None = None
    script: list[str] = []

    @property
    def effective_base_url(self) -> str | None:
        """``base_url`` without a trailing slash, or the kind's default (None for scripted)."""
        if self.base_url:
            return self.base_url.rstrip("/")
        return DEFAULT_BASE_URLS.get(self.kind or "")

    @property
    def uses_vendor_endpoint(self) -> bool:
        """True when calls go to the vendor's own API (no custom ``base_url``)."""
        default = DEFAULT_BASE_URLS.get(self.kind or "")
        return default is not None and self.effective_base_url == default

    @property
    def effective_model(self) -> str | None:
        """``model``, or the kind's default model on the vendor's own endpoint.

        A self-hosted OpenAI-compatible server (Ollama, vLLM...) has no sensible default
        model, so there this stays ``None`` until configured.
        """
        if self.model:
            return self.model
        if self.kind == "anthropic" or self.uses_vendor_endpoint:
            return DEFAULT_MODELS.get(self.kind or "")
        return None

    @field_validator("base_url")
    @classmethod
    def _check_base_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        value = value.strip()
        if not value.startswith(("http://", "https://")):
            raise ValueError(
                f"must be an http:// or https:// URL such as http://127.0.0.1:11434/v1, "
                f"not {value!r}"
            )
        return value

    @field_validator("model")
    @classmethod
    def _check_model(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("must not be empty; leave it unset to use the default model")
        return value.strip() if value is not None else None

    @field_validator("timeout_connect", "timeout_read", "timeout_total")
    @classmethod
    def _check_timeout(cls, value: float) -> float:
        if value <= 0:
            raise ValueError(f"must be a positive number of seconds (got {value})")
        return value

    @field_validator("max_retries")
    @classmethod
    def _check_retries(cls, value: int) -> int:
        if value < 0:
            raise ValueError(f"must be 0 (no retries) or more (got {value})")
        return value

    @field_validator("retry_backoff")
    @classmethod
    def _check_backoff(cls, value: float) -> float:
        if value < 0:
            raise ValueError(f"must be 0 or more seconds (got {value})")
        return value

    @field_validator("max_tokens")
    @classmethod
    def _check_max_tokens(cls, value: int | None) -> int | None:
        if value is not None and value <= 0:
            raise ValueError(f"must be a positive number of tokens (got {value})")
        return value

    @field_validator("temperature")
    @classmethod
    def _check_temperature(cls, value: float | None) -> float | None:
        if value is not None and not 0 <= value <= 2:
            raise ValueError(f"must be between 0 and 2 (got {value})")
        return value
