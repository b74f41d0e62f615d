"""The Slack channel (slack-bolt): Socket Mode or the Events API, threads as sessions.

Importing this package loads only the config model: slack-bolt and slack-sdk are
imported when a Slack channel is created (a gateway without Slack never pays for them).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from channels.base import Channel, ChannelPlugin, lazy_exports
from channels.slack.config import SlackConfig

if TYPE_CHECKING:
    from channels.slack.api import SlackError
    from channels.slack.channel import REFUSAL, SlackChannel

__all__ = ["REFUSAL", "SlackChannel", "SlackConfig", "SlackError", "plugin"]

__getattr__ = lazy_exports(
    __name__,
    {"REFUSAL": "channels.slack.channel", "SlackChannel": "channels.slack.channel",
     "SlackError": "channels.slack.api"},
)  # fmt: skip


def _create(config: SlackConfig) -> Channel:
    from channels.slack.channel import SlackChannel

    return SlackChannel.from_config(config)


plugin = ChannelPlugin(name="slack", config_model=SlackConfig, create=_create)
"""The ``familiar.channels`` entry point of the Slack channel."""
