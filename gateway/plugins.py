"""Channel plugins: the ``familiar.channels`` entry-point group, loaded and built."""

from __future__ import annotations

import importlib.metadata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from channels import cli, ui
from channels.base import Channel, ChannelConfig, ChannelPlugin
from core.errors import ConfigError
from core.logctx import redact

__all__ = [
    "BUILT_IN_CHANNELS",
    "CHANNELS_GROUP",
    "ChannelPlugins",
    "build_channels",
    "discover_channels",
]

CHANNELS_GROUP = "familiar.channels"
_BUILT_IN: dict[str, ChannelPlugin[Any]] = {"cli": cli.plugin, "ui": ui.plugin}
BUILT_IN_CHANNELS = frozenset(_BUILT_IN)
"""The channels of the control socket (``familiar send``/``chat``, the web panel): always
on, run by the gateway itself in the process that serves the control API."""


@dataclass(frozen=True)
class ChannelPlugins:
    """The installed channel plugins: those that load, and why the others do not.

    Attributes:
        loaded: name -> plugin; always holds the built-in ``cli`` and ``ui``.
        broken: name -> why that entry point cannot be used (enabling it is a
            config error; otherwise it is only logged).
    """

    loaded: dict[str, ChannelPlugin[Any]] = field(default_factory=dict)
    broken: dict[str, str] = field(default_factory=dict)


def discover_channels(
    entry_points: Iterable[importlib.metadata.EntryPoint] | None = None,
) -> ChannelPlugins:
    """Load the ``familiar.channels`` entry points (default: the installed ones).

    The built-in ``cli`` and ``ui`` are always included, also when the installed
    metadata predates their entry points; their names are reserved for them.
    """
    if entry_points is None:
        entry_points = installed_entry_points()
    plugins = ChannelPlugins(loaded=dict(_BUILT_IN))
    for ep in entry_points:
        where = f"channel plugin {ep.name!r} ({ep.value})"
        try:
            found = ep.load()
        except Exception as exc:
            plugins.broken[ep.name] = f"{where} cannot be imported: {redact(repr(exc))}"
            continue
        if ep.name in _BUILT_IN and found is not _BUILT_IN[ep.name]:
            plugins.broken[ep.name] = f"{where}: the name {ep.name!r} is a built-in channel's"
        elif not isinstance(found, ChannelPlugin):
            plugins.broken[ep.name] = f"{where} is a {type(found).__name__}, not a ChannelPlugin"
        elif found.name != ep.name:
            plugins.broken[ep.name] = f"{where} is named {found.name!r}: names must match"
        else:
            plugins.loaded[ep.name] = found
    return plugins


@cache
def installed_entry_points() -> tuple[importlib.metadata.EntryPoint, ...]:
    """The installed ``familiar.channels`` entry points, read once per process.

    Reading them parses the metadata of every installed distribution (~2 MiB of objects).
    The supervisor reads them before it forks the zygote, so every role forked from it
    shares that answer instead of reading it again. A plugin installed while the gateway
    runs is seen when it next starts.
    """
    return tuple(importlib.metadata.entry_points(group=CHANNELS_GROUP))


def build_channels(enabled: Mapping[str, ChannelConfig], plugins: ChannelPlugins) -> list[Channel]:
    """Create the enabled channels other than the built-in ones from their validated configs.

    Raises:
        ConfigError: a plugin's ``create`` refused its config or did not return a
            Channel of its name (the message names ``channels.<name>``).
    """
    channels: list[Channel] = []
    for name, config in enabled.items():
        if name in BUILT_IN_CHANNELS:
            continue
        key = f"channels.{name}"
        plugin = plugins.loaded.get(name)
        if plugin is None:  # load_config refuses this; a config built elsewhere may not
            raise ConfigError(f"channel {name!r} is enabled but not installed", key=key)
        try:
            channel = plugin.build(config)
        except Exception as exc:
            raise ConfigError(
                f"channel {name!r} rejected its config [{key}]: {redact(str(exc))}", key=key
            ) from exc
        if not isinstance(channel, Channel) or channel.name != name:
            raise ConfigError(
                f"channel plugin {name!r} created {type(channel).__name__}, "
                f"not a Channel named {name!r} (name, start, stop, send)",
                key=key,
            )
        channels.append(channel)
    return channels
