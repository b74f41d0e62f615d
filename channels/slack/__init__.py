"""The Slack channel (slack-bolt): Socket Mode or the Events API, threads as sessions."""

from __future__ import annotations

from channels.base import ChannelPlugin
from channels.slack.api import SlackError
from channels.slack.channel import REFUSAL, SlackChannel
from channels.slack.config import SlackConfig

__all__ = ["REFUSAL", "SlackChannel", "SlackConfig", "SlackError", "plugin"]

plugin = ChannelPlugin(name="slack", config_model=SlackConfig, create=SlackChannel.from_config)
"""The ``familiar.channels`` entry point of the Slack channel."""
