"""The Microsoft 365 Agents SDK pieces the Teams channel runs on, built from its config."""

from __future__ import annotations

import asyncio
import ipaddress
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from aiohttp import web
from microsoft_agents.authentication.msal import MsalAuth
from microsoft_agents.hosting.aiohttp import CloudAdapter
from microsoft_agents.hosting.core import (
    AccessTokenProviderBase,
    AgentAuthConfiguration,
    ConnectionManager,
    OutboundHostValidator,
    TurnContext,
)
from microsoft_agents.hosting.core.authorization import AuthenticationConstants, AuthTypes
from yarl import URL

from channels.teams.config import TeamsConfig
from channels.teams.service_urls import LoopbackEntry, loopback_entry
from core.errors import FamiliarError

__all__ = [
    "AUTHENTICATED",
    "SERVICE_CONNECTION",
    "ServiceUrlValidator",
    "TeamsError",
    "TeamsSdk",
    "TokenProviderFactory",
    "auth_configuration",
    "check_credentials",
    "is_loopback",
    "token_refusals",
]

log = logging.getLogger(__name__)

SERVICE_CONNECTION = "SERVICE_CONNECTION"
"""The SDK's name for the bot's own connection (the only one familiar configures)."""

TokenProviderFactory = Callable[[AgentAuthConfiguration], AccessTokenProviderBase]
"""Makes the token provider of a connection: the SDK's ``MsalAuth`` (Entra ID) by default."""

_CHECK_TIMEOUT = 20.0
AUTHENTICATED = web.RequestKey("familiar.teams.authenticated", bool)
"""Set on a request by the handler behind the SDK's JWT middleware: past this point an
exception is ours (a failed publish: 500, and Teams redelivers), not a bad token."""


class TeamsError(FamiliarError):
    """Teams could not be reached or refused a call (token, connector, config)."""


async def _reraise(context: TurnContext, error: Exception) -> None:
    raise error


def auth_configuration(config: TeamsConfig) -> AgentAuthConfiguration:
    """The SDK's connection settings for ``config`` (no I/O)."""
    secret = config.app_password.get_secret_value() if config.app_password else None
    return AgentAuthConfiguration(
        auth_type=AuthTypes(config.auth_type),
        client_id=config.app_id or None,
        tenant_id=config.tenant_id or None,
        client_secret=secret,
        connection_name=SERVICE_CONNECTION,
        anonymous_allowed=config.anonymous,
    )


class ServiceUrlValidator(OutboundHostValidator):
    """The SDK's host validator, which also accepts the service URLs of ``loopback``.

    The SDK's own never accepts ``http://localhost:<port>`` (the Agents Playground's and
    the Bot Framework Emulator's): it wants https and refuses loopback addresses
    whatever hosts it is given. The adapter asks only ``enabled`` and ``is_allowed``.
    """

    def __init__(
        self, hosts: list[str], *, enabled: bool, loopback: tuple[LoopbackEntry, ...] = ()
    ) -> None:
        super().__init__(hosts, enabled=enabled)
        self._loopback = loopback

    def is_allowed(self, url: str | URL) -> bool:
        if self.enabled and self._loopback:
            try:
                parsed = URL(url) if isinstance(url, str) else url
            except (TypeError, ValueError):
                return False
            if any(entry.allows(parsed) for entry in self._loopback):
                return True
        return super().is_allowed(url)


@dataclass(frozen=True, slots=True)
class TeamsSdk:
    """The connection manager (tokens) and the adapter (HTTP in, Bot Connector out)."""

    auth: AgentAuthConfiguration
    connections: ConnectionManager
    adapter: CloudAdapter

    @classmethod
    def build(cls, config: TeamsConfig, *, tokens: TokenProviderFactory = MsalAuth) -> TeamsSdk:
        """Build the SDK objects (no I/O; tokens are fetched when first needed)."""
        auth = auth_configuration(config)
        connections = ConnectionManager(
            provider_factory=tokens, connections_configurations={SERVICE_CONNECTION: auth}
        )
        hosts = [h for h in config.service_url_allow if h != "*" and loopback_entry(h) is None]
        validator = ServiceUrlValidator(
            hosts, enabled=config.check_service_url, loopback=config.loopback_service_urls
        )
        adapter = CloudAdapter(connection_manager=connections, host_validator=validator)
        adapter.on_turn_error = _reraise  # a failed publish is a 500: Teams redelivers
        return cls(auth=auth, connections=connections, adapter=adapter)


async def check_credentials(sdk: TeamsSdk) -> None:
    """Acquire a Bot Connector token once: proves the app id, secret and tenant work.

    Runs on a worker thread with its own loop: MSAL builds its client (and discovers
    the authority over HTTP) synchronously on first use, which must not stall the
    gateway's loop. The client and its token cache are reused afterwards.

    Raises:
        TeamsError: no token (the message says which setting to look at).
    """
    provider = sdk.connections.get_default_connection()
    scope = AuthenticationConstants.AGENTS_SDK_SCOPE

    async def fetch() -> str:
        return await provider.get_access_token(scope, [f"{scope}/.default"])

    try:
        async with asyncio.timeout(_CHECK_TIMEOUT):
            token = await asyncio.to_thread(asyncio.run, fetch())
    except TimeoutError as exc:
        raise TeamsError(
            f"token acquisition took over {_CHECK_TIMEOUT:g}s: is Entra ID "
            "(login.microsoftonline.com) reachable?"
        ) from exc
    except Exception as exc:
        raise TeamsError(
            f"token acquisition failed ({_hint(str(exc))}): {' '.join(str(exc).split())[:300]}"
        ) from exc
    if not token:
        raise TeamsError("token acquisition returned no token: check channels.teams.app_id")


def _hint(error: str) -> str:
    """Which setting an Entra error points at (AADSTS codes)."""
    hints = {
        "AADSTS7000215": "channels.teams.app_password is wrong",
        "AADSTS7000222": "channels.teams.app_password has expired",
        "AADSTS700016": "channels.teams.app_id is not registered in that tenant",
        "AADSTS90002": "channels.teams.tenant_id does not exist",
        "AADSTS900023": "channels.teams.tenant_id is not a tenant id",
    }
    for code, hint in hints.items():
        if code in error:
            return hint
    return "check channels.teams.app_id, app_password and tenant_id"


def is_loopback(host: str | None) -> bool:
    """Whether ``host`` is a loopback address (``localhost`` counts)."""
    if host is None:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@web.middleware
async def token_refusals(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    """Answer 401 JSON where the SDK's JWT middleware (the next one) raises on a token.

    The SDK answers most bad tokens with 401 itself, but a malformed or forged one can
    make its validator raise instead (a token without a key id: ``KeyError``), which
    aiohttp would answer with 500. Whatever the SDK raises before our handler ran is a
    refused token; what our handler raises is not, and propagates.
    """
    try:
        return await handler(request)
    except web.HTTPException:
        raise
    except Exception as exc:
        if request.get(AUTHENTICATED):
            raise
        # The type only: the message could quote the token or its claims.
        log.warning(
            "teams refused a request: its token could not be validated (%s)", type(exc).__name__
        )
        return web.json_response({"error": "invalid token"}, status=401)
