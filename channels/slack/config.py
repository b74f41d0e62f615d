"""``[channels.slack]``: the Slack channel's config model."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, SecretStr, model_validator
from pydantic_core import PydanticCustomError

from channels.base import ChannelConfig, DeliveryPolicy
from core.messages import Delivery

__all__ = ["DEFAULT_API_URL", "EVENTS_PATH", "SlackConfig"]

DEFAULT_API_URL = "https://slack.com/api/"


EVENTS_PATH = "/slack/events"
"""Where Slack POSTs events in http mode (the app manifest's request URLs)."""
_CONVERSATION_ID = re.compile(r"[CDG][A-Z0-9]+")
"""A Slack channel, DM or group conversation id (what replies are posted to)."""


class SlackConfig(ChannelConfig):
    """Slack (slack-bolt): direct messages, @-mentions and threads the bot is part of."""

    mode: Literal["socket", "http"] = "socket"
    """``socket``: Socket Mode (an app-level token, no public URL); ``http``: Events API
    requests to ``POST /slack/events`` on the gateway's HTTP server."""

    @property
    def http_routes(self) -> tuple[str, ...]:
        return (EVENTS_PATH,) if self.mode == "http" else ()

    bot_token: SecretStr | None = None
    """The bot token (``xoxb-...``); both modes."""
    app_token: SecretStr | None = None
    """The app-level token (``xapp-...``, scope ``connections:write``); socket mode."""
    signing_secret: SecretStr | None = None
    """The app's signing secret; http mode (requests with a bad signature get 401)."""
    api_url: str = DEFAULT_API_URL
    """Base URL of the Slack Web API (enterprise proxies, tests)."""
    allow_users: list[str] = Field(default_factory=list)
    """Slack user ids that may talk to the bot; empty: everyone in the workspace."""
    allow_channels: list[str] = Field(default_factory=list)
    """Conversation ids (channels, and DMs: ``D...``) the bot answers in; empty: all."""
    reply_in_thread: bool = True
    """Answer a top-level message in a channel in a thread under it (else in the
    channel). Direct messages follow ``dm_reply_in_thread``."""
    dm_reply_in_thread: bool = False
    """Answer a top-level direct message in a thread under it (else inline in the DM,
    where the whole DM is one conversation). Replies in a thread stay in it either way."""
    respond_to_bots: bool = False
    """Answer messages posted by other bots."""
    max_file_bytes: int = Field(default=256 * 1024, ge=0)
    """Text files up to this size are downloaded and given to the agent."""
    send_attempts: int = Field(default=DeliveryPolicy().max_attempts, ge=1, le=100)
    """Failed attempts to post a reply before it is given up on. Rate limits (429 with
    ``Retry-After``) are waited out and never count."""

    def delivery_problem(self, delivery: Delivery) -> str | None:
        if _CONVERSATION_ID.fullmatch(delivery.chat_id):
            return None
        return (
            f"{delivery.chat_id!r} is not a Slack conversation the bot has heard from "
            "(replies go where the session's last message came from; write to the bot "
            "there first)"
        )

    def threads_replies(self, *, dm: bool) -> bool:
        """Whether a top-level message (a direct message when ``dm``) is answered in a
        thread under it."""
        return self.dm_reply_in_thread if dm else self.reply_in_thread

    @model_validator(mode="after")
    def _tokens_for_mode(self) -> SlackConfig:
        if not self.enabled:
            return self
        needed = ["bot_token", "app_token" if self.mode == "socket" else "signing_secret"]
        for key in needed:
            value = getattr(self, key)
            if value is None or not value.get_secret_value().strip():
                raise PydanticCustomError(
                    "slack_token_missing",
                    "channels.slack.{key} is required in {mode} mode "
                    "(set it in config.toml or FAMILIAR_CHANNELS__SLACK__{env})",
                    {"key": key, "mode": self.mode, "env": key.upper()},
                )
        return self
