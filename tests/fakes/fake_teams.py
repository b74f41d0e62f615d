"""A Microsoft Teams stand-in on loopback: the Bot Connector API the channel replies through,
the JWKS its tokens are checked against, and Entra tokens for both directions.

Inbound: `FakeTeams.token` signs a Bot Framework token (RS256, a locally generated key)
for an activity; `FakeTeams.sdk_jwks` points the SDK's JWK client for the Bot Framework
issuer at this server's JWKS (the SDK hard-codes Microsoft's URL: that is its network
edge; every other check runs for real). Outbound: `FakeEntraTokens` stands in for the
SDK's MSAL token provider (Entra ID), issuing tokens signed with the same key, which the
fake connector verifies on every call. Every connector call is recorded (``activities``).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import jwt
from aiohttp import web
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt import PyJWKClient
from jwt.algorithms import RSAAlgorithm
from microsoft_agents.hosting.core import AgentAuthConfiguration
from microsoft_agents.hosting.core.authorization.jwt import jwt_token_validator

from channels.base import ChannelPlugin
from channels.teams import TeamsChannel, TeamsConfig
from tests.fakes.loopback import LoopbackServer

__all__ = [
    "APP_ID",
    "BOT_FRAMEWORK",
    "BOT_ID",
    "TENANT",
    "WRONG_SECRET",
    "Activity",
    "FakeEntraTokens",
    "FakeTeams",
    "message",
    "plugin",
]

APP_ID = "00000000-0000-4000-8000-00000000b07a"
BOT_ID = f"28:{APP_ID}"
TENANT = "72f988bf-0000-4000-8000-000000000001"
BOT_FRAMEWORK = "https://api.botframework.com"
WRONG_SECRET = "wrong-secret"
"""A client secret `FakeEntraTokens` refuses (as Entra does with AADSTS7000215)."""
_KID = "fake-teams-key"
_ids = itertools.count(1)


@functools.cache
def _key() -> rsa.RSAPrivateKey:
    """One RSA key per test process: signs inbound and outbound tokens."""
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _sign(claims: dict[str, Any], *, kid: str = _KID) -> str:
    now = int(time.time())
    return jwt.encode(
        {"iat": now, "nbf": now - 5, "exp": now + 3600, **claims},
        _key(),
        algorithm="RS256",
        headers={"kid": kid},
    )


class FakeEntraTokens:
    """The SDK's token provider protocol, answering as Entra ID would (no network).

    Args:
        configuration: the connection's settings (client id, secret, tenant).
    """

    def __init__(self, configuration: AgentAuthConfiguration) -> None:
        self._configuration = configuration
        self._cache: dict[str, tuple[float, str]] = {}
        self.issued = 0

    @property
    def configuration(self) -> AgentAuthConfiguration:
        return self._configuration

    async def get_access_token(
        self, resource_url: str, scopes: list[str], force_refresh: bool = False
    ) -> str:
        cfg = self._configuration
        if cfg.CLIENT_SECRET == WRONG_SECRET:
            raise ValueError(
                "Failed to acquire token. {'error': 'invalid_client', 'error_description': "
                "'AADSTS7000215: Invalid client secret provided.'}"
            )
        cached = self._cache.get(resource_url)
        if cached is not None and cached[0] > time.time() + 300 and not force_refresh:
            return cached[1]  # as MSAL serves a token from its cache until near expiry
        self.issued += 1
        token = _sign({"aud": resource_url, "appid": cfg.CLIENT_ID, "tid": cfg.TENANT_ID})
        self._cache[resource_url] = (time.time() + 3600, token)
        return token

    def get_token_credential(self) -> Any:
        raise NotImplementedError

    async def acquire_token_on_behalf_of(self, scopes: list[str], user_assertion: str) -> str:
        raise NotImplementedError

    async def get_agentic_application_token(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError

    async def get_agentic_instance_token(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError

    async def get_agentic_user_token(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


plugin = ChannelPlugin(
    name="teams",
    config_model=TeamsConfig,
    create=lambda config: TeamsChannel(config=config, tokens=FakeEntraTokens),
)
"""The Teams channel with `FakeEntraTokens` in place of MSAL (a test entry point)."""


@dataclass(frozen=True)
class Activity:
    """One activity the bot sent to the connector."""

    conversation: str
    reply_to: str | None
    body: dict[str, Any]
    token: str
    at: float
    id: str = ""
    edit_of: str | None = None

    @property
    def type(self) -> str:
        return str(self.body.get("type"))

    @property
    def text(self) -> str:
        return str(self.body.get("text") or "")


def message(
    text: str,
    *,
    service_url: str,
    kind: str = "personal",
    conversation: str | None = None,
    user: str = "alice",
    tenant: str = TENANT,
    activity_id: str | None = None,
) -> dict[str, Any]:
    """A Teams ``message`` activity from ``user`` in a 1:1 chat, group chat or channel.

    In a group chat or channel the text starts with the bot's @-mention, as Teams sends it.
    """
    activity_id = activity_id or f"17000000{next(_ids):05d}"
    conversation = (
        conversation
        or {
            "personal": f"a:1-{user}-personal",
            "groupChat": "19:group-chat@thread.v2",
            "channel": f"19:general@thread.tacv2;messageid={activity_id}",
        }[kind]
    )
    body: dict[str, Any] = {
        "type": "message",
        "id": activity_id,
        "timestamp": "2026-11-23T01:00:00.000Z",
        "serviceUrl": service_url,
        "channelId": "msteams",
        "from": {"id": f"29:{user}", "name": user.title(), "aadObjectId": f"aad-{user}"},
        "conversation": {
            "id": conversation,
            "conversationType": kind,
            "tenantId": tenant,
            **({"isGroup": True} if kind != "personal" else {}),
        },
        "recipient": {"id": BOT_ID, "name": "familiar"},
        "text": text,
        "textFormat": "plain",
        "channelData": {"tenant": {"id": tenant}},
    }
    if kind != "personal":
        mention = "<at>familiar</at>"
        body["text"] = f"{mention} {text}"
        body["entities"] = [
            {"type": "mention", "text": mention, "mentioned": {"id": BOT_ID, "name": "familiar"}}
        ]
    return body


@dataclass(kw_only=True)
class FakeTeams(LoopbackServer):
    """The Bot Connector API under ``/v3/conversations/``, and a JWKS on ``/keys``.

    Attributes:
        activities: what the bot sent, in order (typing indicators included).
        edits: the bot's edits of its own messages (``edit_of`` is the message's id).
        rejected: connector calls refused for a bad or missing token.
        fail_next: how many of the next connector calls get 503.
    """

    activities: list[Activity] = field(default_factory=list, init=False)
    edits: list[Activity] = field(default_factory=list, init=False)
    rejected: int = field(default=0, init=False)
    fail_next: int = 0
    _changed: asyncio.Condition = field(default_factory=asyncio.Condition, init=False)

    def routes(self, app: web.Application) -> None:
        app.router.add_get("/keys", self._keys)
        app.router.add_post("/v3/conversations/{conversation}/activities", self._activity)
        app.router.add_post(
            "/v3/conversations/{conversation}/activities/{reply_to}", self._activity
        )
        app.router.add_put("/v3/conversations/{conversation}/activities/{edit_of}", self._activity)

    @property
    def service_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    @property
    def jwks_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/keys"

    def token(
        self,
        *,
        audience: str = APP_ID,
        service_url: str | None = None,
        issuer: str = BOT_FRAMEWORK,
        kid: str = _KID,
        expired: bool = False,
    ) -> str:
        """A Bot Framework token as Teams sends with each activity."""
        claims: dict[str, Any] = {
            "iss": issuer,
            "aud": audience,
            "serviceurl": service_url or self.service_url,
        }
        if expired:
            claims.update(iat=1_600_000_000, nbf=1_600_000_000, exp=1_600_000_600)
        return _sign(claims, kid=kid)

    @contextlib.contextmanager
    def sdk_jwks(self) -> Iterator[None]:
        """Point the SDK's JWK client for Bot Framework tokens at ``/keys`` (restored after)."""
        manager = jwt_token_validator.JwtTokenValidator._jwk_client_manager
        uri = jwt_token_validator.BOTFRAMEWORK_JWKS_URIS[BOT_FRAMEWORK]
        before = manager._cache.get(uri)
        manager._cache[uri] = jwt_token_validator._JwkClientCacheEntry(
            PyJWKClient(self.jwks_url), threading.Lock()
        )
        try:
            yield
        finally:
            if before is None:
                manager._cache.pop(uri, None)
            else:
                manager._cache[uri] = before

    def of(self, kind: str = "message", *, conversation: str | None = None) -> list[Activity]:
        return [
            a
            for a in self.activities
            if a.type == kind and (conversation is None or a.conversation == conversation)
        ]

    async def wait_for(
        self,
        kind: str = "message",
        count: int = 1,
        *,
        conversation: str | None = None,
        timeout: float = 30.0,
    ) -> list[Activity]:
        """Wait until ``count`` activities of ``kind`` (in ``conversation``) arrived."""
        async with asyncio.timeout(timeout), self._changed:
            await self._changed.wait_for(
                lambda: len(self.of(kind, conversation=conversation)) >= count
            )
        return self.of(kind, conversation=conversation)

    async def _keys(self, request: web.Request) -> web.Response:
        public = RSAAlgorithm.to_jwk(_key().public_key(), as_dict=True)
        return web.json_response({"keys": [{**public, "kid": _KID, "use": "sig"}]})

    async def _activity(self, request: web.Request) -> web.Response:
        token = request.headers.get("Authorization", "").removeprefix("Bearer ").strip()
        if not _valid_outbound(token):
            self.rejected += 1
            return web.json_response({"error": {"code": "Unauthorized"}}, status=401)
        if self.fail_next > 0:
            self.fail_next -= 1
            return web.json_response({"error": {"code": "ServiceUnavailable"}}, status=503)
        body = await request.json()
        self.requests.append(body)
        edit_of = request.match_info.get("edit_of")
        sent = Activity(
            conversation=request.match_info["conversation"],
            reply_to=request.match_info.get("reply_to"),
            body=body,
            token=token,
            at=time.monotonic(),
            id=edit_of or f"reply-{len(self.activities) + 1}",
            edit_of=edit_of,
        )
        async with self._changed:
            (self.edits if edit_of else self.activities).append(sent)
            self._changed.notify_all()
        return web.json_response({"id": sent.id})


def _valid_outbound(token: str) -> bool:
    """A token `FakeEntraTokens` issued for the Bot Connector (anonymous mode sends none)."""
    if not token:
        return True  # anonymous mode: the SDK sends no token; tests check ``Activity.token``
    try:
        claims = jwt.decode(
            token, _key().public_key(), algorithms=["RS256"], audience=BOT_FRAMEWORK
        )
    except jwt.PyJWTError:
        return False
    return claims.get("appid") == APP_ID
