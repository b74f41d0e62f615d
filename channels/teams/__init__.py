"""The Microsoft Teams channel (Microsoft 365 Agents SDK): chats and channel threads.

Importing this package loads only the config model: the Agents SDK is imported when a
Teams channel is created (a gateway without Teams never pays for it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from channels.base import Channel, ChannelPlugin, lazy_exports
from channels.teams.config import ROUTE, TeamsConfig

if TYPE_CHECKING:
    from channels.teams.channel import REFUSAL, TeamsChannel
    from channels.teams.sdk import TeamsError

__all__ = ["REFUSAL", "ROUTE", "TeamsChannel", "TeamsConfig", "TeamsError", "plugin"]

__getattr__ = lazy_exports(
    __name__,
    {"REFUSAL": "channels.teams.channel",
     "TeamsChannel": "channels.teams.channel", "TeamsError": "channels.teams.sdk"},
)  # fmt: skip


def _create(config: TeamsConfig) -> Channel:
    from channels.teams.channel import TeamsChannel

    return TeamsChannel.from_config(config)


plugin = ChannelPlugin(name="teams", config_model=TeamsConfig, create=_create)
"""The ``familiar.channels`` entry point of the Teams channel."""
