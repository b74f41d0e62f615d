"""``[channels.teams]``: the Microsoft Teams channel's config model."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr, model_validator
from pydantic_core import PydanticCustomError

from channels.base import ChannelConfig
from channels.teams.service_urls import LoopbackEntry, loopback_entry
from core.messages import Delivery

__all__ = ["REFERENCE_KEY", "ROUTE", "AuthType", "TeamsConfig"]

AuthType = Literal["ClientSecret", "UserManagedIdentity", "SystemManagedIdentity"]
"""How the bot proves who it is to Entra ID (the Agents SDK's ``AUTHTYPE`` values)."""


REFERENCE_KEY = "ref"
"""The `Delivery.route` key holding the stored conversation reference (JSON)."""

ROUTE = "/api/messages"
"""Where Teams (the Azure Bot's messaging endpoint) POSTs activities: a sub-app at
``/api`` carries the SDK's JWT middleware, which so covers nothing else."""


class TeamsConfig(ChannelConfig):
    """Microsoft Teams (Microsoft 365 Agents SDK): 1:1 chats, group chats, channel mentions.

    Teams POSTs activities to ``POST /api/messages`` on the gateway's HTTP server, behind
    the SDK's JWT check; replies are sent later through the Bot Connector.
    """

    @property
    def http_routes(self) -> tuple[str, ...]:
        return (ROUTE,)

    app_id: str = ""
    """The Azure Bot's Microsoft App ID (client id): the audience of Teams' tokens."""
    app_password: SecretStr | None = None
    """The app registration's client secret (``auth_type = "ClientSecret"``)."""
    tenant_id: str = ""
    """The Entra tenant of the app registration (single-tenant bots)."""
    auth_type: AuthType = "ClientSecret"
    """Credential kind, as the SDK names it; managed identities need no password."""
    allow_tenants: list[str] = Field(default_factory=list)
    """Entra tenant ids whose users may talk to the bot; empty: any tenant."""
    allow_users: list[str] = Field(default_factory=list)
    """Entra (AAD) object ids of the users who may talk to the bot; empty: everyone."""
    anonymous: bool = False
    """Accept activities without a token and send replies without one. Only for local
    tests: refused unless ``http.host`` is a loopback address."""
    service_url_allow: list[str] = Field(default_factory=list)
    """Hosts a ``serviceUrl`` may name besides Microsoft's (the SDK's host validator;
    https only). ``["*"]`` turns the check off (a loopback fake connector in tests). In
    anonymous mode an entry may name this machine (``localhost``, ``127.0.0.1``,
    ``[::1]``, optionally ``:port``): the Agents Playground's and the Bot Framework
    Emulator's ``http://localhost:<port>`` service URLs."""
    typing_interval: float = Field(default=3.0, gt=0)
    """Seconds between two typing indicators while a turn runs."""

    @model_validator(mode="after")
    def _credentials(self) -> TeamsConfig:
        if not self.enabled or self.anonymous:
            return self
        missing = [] if self.app_id.strip() else ["app_id"]
        if self.auth_type == "ClientSecret" and (
            self.app_password is None or not self.app_password.get_secret_value().strip()
        ):
            missing.append("app_password")
        if missing:
            raise PydanticCustomError(
                "teams_credentials_missing",
                "channels.teams.{key} is required (set it in config.toml or "
                "FAMILIAR_CHANNELS__TEAMS__{env}; anonymous = true is for local tests only)",
                {"key": missing[0], "env": missing[0].upper()},
            )
        return self

    @model_validator(mode="after")
    def _loopback_entries(self) -> TeamsConfig:
        for entry in self.service_url_allow:
            try:
                found = loopback_entry(entry)
            except ValueError as exc:
                raise PydanticCustomError(
                    "teams_service_url",
                    "channels.teams.service_url_allow entry {entry!r} is not a host: {error}",
                    {"entry": entry, "error": str(exc)},
                ) from exc
            if found is not None and not self.anonymous:
                raise PydanticCustomError(
                    "teams_service_url_loopback",
                    "channels.teams.service_url_allow entry {entry!r} names this machine, "
                    "which only anonymous mode (local tests: anonymous = true) may use",
                    {"entry": entry},
                )
        return self

    @property
    def loopback_service_urls(self) -> tuple[LoopbackEntry, ...]:
        """The ``service_url_allow`` entries naming this machine (anonymous mode only)."""
        if not self.anonymous:
            return ()
        found = (loopback_entry(e) for e in self.service_url_allow)
        return tuple(e for e in found if e is not None)

    def delivery_problem(self, delivery: Delivery) -> str | None:
        if delivery.route.get(REFERENCE_KEY):
            return None
        return (
            "Teams lets the bot write only to a conversation that wrote to it first, and "
            f"{delivery.chat_id!r} never did (no conversation reference is stored)"
        )

    @property
    def check_service_url(self) -> bool:
        """Whether the SDK's host validator checks ``serviceUrl`` (off with ``"*"``)."""
        return "*" not in self.service_url_allow
