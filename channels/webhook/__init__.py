"""The webhook channel: ``POST /webhook/<name>``, replies by waiting, polling or callback."""

from __future__ import annotations

from channels.base import ChannelPlugin
from channels.webhook.auth import sign, signed_headers
from channels.webhook.channel import CallbackFailed, WebhookChannel, WebhookStopped
from channels.webhook.config import HookConfig, WebhookConfig

__all__ = [
    "CallbackFailed",
    "HookConfig",
    "WebhookChannel",
    "WebhookConfig",
    "WebhookStopped",
    "plugin",
    "sign",
    "signed_headers",
]


def _create(config: WebhookConfig) -> WebhookChannel:
    return WebhookChannel(config=config)


plugin = ChannelPlugin(name="webhook", config_model=WebhookConfig, create=_create)
"""The ``familiar.channels`` entry point of the webhook channel."""
