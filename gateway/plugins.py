"""Plugin channels: the ``familiar.channels`` entry-point group and their config tables."""

from __future__ import annotations

import importlib.metadata
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel

from channels.base import Channel
from core.errors import ConfigError

__all__ = ["CHANNELS_GROUP", "load_channels"]

CHANNELS_GROUP = "familiar.channels"


def load_channels(
    tables: Mapping[str, Any], entry_points: Iterable[importlib.metadata.EntryPoint]
) -> list[Channel]:
    """Build the plugin channels whose ``[channels.<name>]`` table says ``enabled = true``.

    Each entry point of the ``familiar.channels`` group resolves to a ChannelFactory,
    called with the channel's table (without ``enabled``). The built-in ``cli``
    channel is not loaded here.

    Raises:
        ConfigError: a channel is enabled but not installed, cannot be imported, rejects
            its config, or is not a Channel (the message names the channel).
    """
    enabled: dict[str, dict[str, Any]] = {}
    for name, table in tables.items():
        settings = table.model_dump() if isinstance(table, BaseModel) else dict(table or {})
        if settings.pop("enabled", False) is True and name != "cli":
            enabled[name] = settings
    found = {ep.name: ep for ep in entry_points if ep.name in enabled}
    channels: list[Channel] = []
    for name, settings in enabled.items():
        key = f"channels.{name}"
        ep = found.get(name)
        if ep is None:
            raise ConfigError(
                f"channel {name!r} is enabled but no package provides it "
                f"(no {CHANNELS_GROUP!r} entry point named {name!r})",
                key=key,
            )
        try:
            factory = ep.load()
        except Exception as exc:
            raise ConfigError(
                f"channel plugin {name!r} ({ep.value}) cannot be imported: {exc!r}", key=key
            ) from exc
        try:
            channel = factory(settings)
        except Exception as exc:
            raise ConfigError(
                f"channel {name!r} rejected its config [{key}]: {exc}", key=key
            ) from exc
        if not isinstance(channel, Channel):
            raise ConfigError(
                f"channel plugin {name!r} ({ep.value}) returned {type(channel).__name__}, "
                "not a Channel (name, start, stop, send)",
                key=key,
            )
        channels.append(channel)
    return channels
