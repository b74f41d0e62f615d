"""Which channels the front runs itself and which run in processes of their own."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.errors import ConfigError
from gateway.channel_children import isolated_channels
from gateway.config import FamiliarConfig, load_config

_CHANNELS = (
    '[channels.slack]\nenabled = true\nbot_token = "xoxb-1"\napp_token = "xapp-1"\n\n'
    "[channels.webhook]\nenabled = true\n\n"
    '[channels.webhook.hooks.ci]\nsecret = "s"\n'
)


def _config(home: Path, gateway: str = "") -> FamiliarConfig:
    (home / "config.toml").write_text(f"[gateway]\n{gateway}\n{_CHANNELS}")
    return load_config(home)


def test_main_runs_channels_with_an_sdk_of_their_own_in_child_processes(tmp_path: Path) -> None:
    config = _config(tmp_path)
    assert config.gateway.processes == "main"  # the default
    assert isolated_channels(config, main=True) == ("slack",)


def test_per_channel_isolates_every_channel_but_cli(tmp_path: Path) -> None:
    config = _config(tmp_path, 'channel_processes = "per-channel"')
    assert sorted(isolated_channels(config, main=True)) == ["slack", "webhook"]
    assert sorted(isolated_channels(config, main=False)) == ["slack", "webhook"]


def test_the_channels_role_of_multi_runs_every_channel_itself_by_default(tmp_path: Path) -> None:
    config = _config(tmp_path, 'processes = "multi"')
    assert isolated_channels(config, main=False) == ()


def test_single_refuses_per_channel(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="per-channel"):
        _config(tmp_path, 'processes = "single"\nchannel_processes = "per-channel"')
