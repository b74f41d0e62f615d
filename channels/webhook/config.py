"""The webhook channel's config: ``[channels.webhook]`` and its ``hooks.<name>`` tables."""

from __future__ import annotations

import re
from typing import Annotated, Self

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from channels.base import ChannelConfig, DeliveryPolicy
from channels.webhook.callbacks import CallbackRefused, normalise_url

__all__ = ["HOOK_NAME", "MAX_BODY_LIMIT", "HookConfig", "WebhookConfig"]

HOOK_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
"""A hook's name: its ``POST /webhook/<name>`` path segment and session key part."""
MAX_BODY_LIMIT = 1024 * 1024
"""The largest ``max_body``: aiohttp's default ``client_max_size``, which the gateway's
HTTP server keeps (its body checks answer 413 beyond it, for every route)."""


class HookConfig(BaseModel):
    """One webhook: ``[channels.webhook.hooks.<name>]``. Needs a ``secret`` or a ``token``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    secret: SecretStr | None = None
    """HMAC-SHA256 key: requests carry ``X-Familiar-Timestamp`` and
    ``X-Familiar-Signature: sha256=<hex of HMAC("{timestamp}.{body}")>``; callbacks are
    signed with it."""
    token: SecretStr | None = None
    """Bearer token: requests carry ``Authorization: Bearer <token>``."""
    callback_allow: list[str] = Field(default_factory=list)
    """URL prefixes a ``callback_url`` must start with (none: no callbacks); both are
    compared in their normal form (dot segments resolved, percent-encoding and the case
    of scheme and host normalised)."""
    max_body: Annotated[int, Field(gt=0, le=MAX_BODY_LIMIT)] = MAX_BODY_LIMIT
    """Largest request body in bytes (413 beyond); at most 1 MiB, the limit of the
    gateway's HTTP server, which refuses larger bodies before any route sees them."""
    max_text: Annotated[int, Field(gt=0)] = 32_000
    """Longest ``text`` in characters (400 beyond)."""
    wait_timeout: Annotated[float, Field(gt=0)] = 120.0
    """Seconds a ``"wait": true`` request waits for the reply before 504."""
    rate: Annotated[float, Field(gt=0)] = 1.0
    """Requests per second accepted on average (token bucket; 429 beyond)."""
    burst: Annotated[int, Field(ge=1)] = 20
    """Requests accepted at once before ``rate`` applies."""
    allow_approve: bool = False
    """Callers of this hook may answer ``/approve`` and ``/deny`` (recorded as decided by
    ``webhook:<name>``). Off: both are refused, and a command that needs approval is
    refused at once in this hook's sessions (nobody could answer it)."""

    @field_validator("callback_allow", mode="after")
    @classmethod
    def _http_prefixes(cls, value: list[str]) -> list[str]:
        for prefix in value:
            if not re.match(r"https?://[^/?#]+/", prefix, flags=re.IGNORECASE):
                raise ValueError(
                    f"{prefix!r}: a callback prefix is an http(s) URL with a host and a path "
                    "(at least '/'), so it cannot match another host"
                )
            try:
                normalise_url(prefix)
            except CallbackRefused as exc:
                raise ValueError(f"{prefix!r}: not a usable callback prefix ({exc})") from None
        return value

    @model_validator(mode="after")
    def _authenticated(self) -> Self:
        if self.secret is None and self.token is None:
            raise ValueError("a hook needs a secret or a token (or both)")
        if self.secret is not None and not self.secret.get_secret_value():
            raise ValueError("secret must not be empty")
        if self.token is not None and not self.token.get_secret_value():
            raise ValueError("token must not be empty")
        if self.callback_allow and self.secret is None:
            raise ValueError("callback_allow needs a secret: callbacks are signed with it")
        return self


class WebhookConfig(ChannelConfig):
    """Webhooks: signed HTTP requests in, replies by waiting, polling or signed callback."""

    @property
    def http_routes(self) -> tuple[str, ...]:
        return ("/webhook",)

    hooks: dict[str, HookConfig] = Field(default_factory=dict)
    """The hooks, by name: ``[channels.webhook.hooks.<name>]``."""
    callback_attempts: Annotated[int, Field(ge=1)] = 6
    """Tries per callback before it is recorded as failed."""
    callback_backoff: Annotated[float, Field(gt=0)] = 20.0
    """Seconds before the first callback retry; doubles per attempt (6 tries: ~10 min).
    Tunable mainly for tests."""
    callback_timeout: Annotated[float, Field(gt=0)] = 10.0
    """Seconds one callback POST may take."""

    @field_validator("hooks", mode="after")
    @classmethod
    def _names(cls, value: dict[str, HookConfig]) -> dict[str, HookConfig]:
        for name in value:
            if not HOOK_NAME.fullmatch(name):
                raise ValueError(
                    f"hook name {name!r}: 1-64 letters, digits, '_' or '-', "
                    "starting with a letter or digit"
                )
        return value

    @property
    def delivery_policy(self) -> DeliveryPolicy:
        """The callbacks' retry schedule: ``callback_backoff`` doubling, 16x at most."""
        return DeliveryPolicy(
            max_attempts=self.callback_attempts,
            first_backoff=self.callback_backoff,
            max_backoff=self.callback_backoff * 16,
        )
