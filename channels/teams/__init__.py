"""The Microsoft Teams channel (Microsoft 365 Agents SDK): chats and channel threads."""

from __future__ import annotations

from channels.base import ChannelPlugin
from channels.teams.channel import REFUSAL, ROUTE, TeamsChannel
from channels.teams.config import TeamsConfig
from channels.teams.sdk import TeamsError

__all__ = ["REFUSAL", "ROUTE", "TeamsChannel", "TeamsConfig", "TeamsError", "plugin"]

plugin = ChannelPlugin(name="teams", config_model=TeamsConfig, create=TeamsChannel.from_config)
"""The ``familiar.channels`` entry point of the Teams channel."""
