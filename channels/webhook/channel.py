"""The webhook channel: hooks on the gateway's HTTP server; replies pushed to callbacks."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import aiohttp
from yarl import URL

from channels.base import ChannelContext, DeliveryPolicy
from channels.webhook.auth import signed_headers
from channels.webhook.callbacks import CallbackRefused, allowed_callback
from channels.webhook.config import WebhookConfig
from channels.webhook.http import WebhookApi
from channels.webhook.render import to_callback
from channels.webhook.stats import WebhookStats
from core.errors import BusError, FamiliarError
from core.messages import OutboundMessage

__all__ = ["CallbackFailed", "WebhookChannel", "WebhookStopped"]

log = logging.getLogger(__name__)


class WebhookStopped(BusError):
    """The webhook channel is not running."""


class CallbackFailed(FamiliarError):
    """A callback POST did not succeed (retried by the delivery worker).

    Attributes:
        status: the callback's HTTP status, None when it could not be reached.
    """

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class WebhookChannel:
    """Serves ``/webhook/...`` on the gateway's HTTP app; ``send`` POSTs to callbacks.

    Replies without a ``callback_url`` need no delivery: the caller waited for them or
    polls for them (both read the bus). A failed callback raises, so the durable outbox
    keeps it and the DeliveryWorker retries it on `delivery_policy`, across restarts.
    """

    name = "webhook"

    def __init__(self, *, config: WebhookConfig, clock: Callable[[], float] = time.time) -> None:
        self.config = config
        self._stats = WebhookStats()
        self._api = WebhookApi(hooks=config.hooks, stats=self._stats, clock=clock)
        self._clock = clock
        self._routed: object | None = None
        self._client: aiohttp.ClientSession | None = None

    @property
    def delivery_policy(self) -> DeliveryPolicy:
        return self.config.delivery_policy

    @property
    def metrics_collector(self) -> WebhookStats:
        return self._stats

    async def start(self, context: ChannelContext) -> None:
        if context.http is None:
            raise WebhookStopped("the webhook channel needs the HTTP server ([http] enabled)")
        if self._routed is not context.http:  # a retried start must not add them again
            self._api.add_routes(context.http)
            self._routed = context.http
        if self._client is None:
            timeout = aiohttp.ClientTimeout(total=self.config.callback_timeout)
            self._client = aiohttp.ClientSession(timeout=timeout)
        self._api.bus = context.bus
        log.info("webhook hooks: %s", ", ".join(sorted(self.config.hooks)) or "none")

    async def stop(self) -> None:
        self._api.bus = None
        client, self._client = self._client, None
        if client is not None:
            await client.close()

    async def send(self, message: OutboundMessage) -> None:
        """POST the reply to its callback URL, signed; raise to have it retried."""
        url = message.delivery.route.get("callback_url")
        if not url:
            return  # waited for or polled: the bus has it
        hook_name = message.delivery.chat_id
        hook = self.config.hooks.get(hook_name)
        if hook is None or hook.secret is None:
            raise CallbackFailed(f"hook {hook_name!r} is gone or has no secret to sign with")
        try:
            allowed = allowed_callback(url, hook.callback_allow)
        except CallbackRefused as exc:
            raise CallbackFailed(f"callback_url refused: {exc}") from None
        if allowed is None:
            raise CallbackFailed(f"callback_url no longer allowed for hook {hook_name!r}")
        client = self._client
        if client is None:
            raise WebhookStopped("the webhook channel is not running")
        body = to_callback(message)
        headers = {
            **signed_headers(hook.secret.get_secret_value(), body, now=self._clock()),
            "Content-Type": "application/json",
            "X-Familiar-Message-Id": message.inbound_id,
        }
        try:
            # encoded=True: the normal form that was checked is what is sent, byte for byte.
            target = URL(allowed, encoded=True)
            post = client.post(target, data=body, headers=headers, allow_redirects=False)
            async with post as resp:
                status = resp.status
        except (aiohttp.ClientError, TimeoutError) as exc:
            self._stats.callback("failed")
            raise CallbackFailed(f"callback not reached: {type(exc).__name__}: {exc}") from exc
        if not 200 <= status < 300:
            self._stats.callback("failed")
            raise CallbackFailed(f"callback answered HTTP {status}", status=status)
        self._stats.callback("delivered")
        log.info("callback delivered hook=%s status=%d", hook_name, status)
