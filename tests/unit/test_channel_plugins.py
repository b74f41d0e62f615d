"""Channel plugins: discovery, typed ``[channels.<name>]`` tables, init docs, masking."""

from __future__ import annotations

import importlib.metadata
import json
import re
import tomllib
from pathlib import Path

import pytest
from pydantic import SecretStr

from channels import cli, ui
from core.errors import ConfigError
from core.providers.config import ProviderConfig
from gateway.config import FamiliarConfig, config_model, load_config
from gateway.init import render_default_config
from gateway.masking import MASK, mask_url, masked_config
from gateway.plugins import CHANNELS_GROUP, ChannelPlugins, build_channels, discover_channels
from tests.fakes.fake_platform import LoopChannel, LoopConfig

TOKEN = "xoxb-loop-secret-0123456789abcdef"


def _ep(name: str, value: str) -> importlib.metadata.EntryPoint:
    return importlib.metadata.EntryPoint(name=name, value=value, group=CHANNELS_GROUP)


LOOP = _ep("loop", "tests.fakes.fake_platform:plugin")


def plugins(*extra: importlib.metadata.EntryPoint) -> ChannelPlugins:
    return discover_channels([LOOP, _ep("cli", "channels.cli:plugin"), *extra])


def write(home: Path, text: str) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(text, encoding="utf-8")


def test_discovery_loads_plugins_and_explains_broken_ones() -> None:
    found = plugins(
        _ep("gone", "no_such_module_xyz:plugin"),
        _ep("odd", "tests.fakes.fake_platform:LoopConfig"),
        _ep("alias", "tests.fakes.fake_platform:plugin"),
        _ep("cli", "tests.fakes.fake_platform:plugin"),
        _ep("ui", "tests.fakes.fake_platform:plugin"),
    )
    assert set(found.loaded) == {"cli", "ui", "loop"}
    assert found.loaded["cli"] is cli.plugin
    assert "cannot be imported" in found.broken["gone"]
    assert "not a ChannelPlugin" in found.broken["odd"]
    assert "names must match" in found.broken["alias"]
    assert "built-in" in found.broken["cli"]
    assert found.loaded["ui"] is ui.plugin
    assert "built-in" in found.broken["ui"]
    # The built-in channels are there even when the installed metadata predates their
    # entry points.
    assert set(discover_channels([]).loaded) == {"cli", "ui"}


def test_channel_tables_are_typed_by_their_plugin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(
        tmp_path,
        f'[channels.loop]\nenabled = true\ntoken = "{TOKEN}"\n'
        '[channels.someday]\nenabled = false\nanswer = "kept"\n',
    )
    monkeypatch.setenv("FAMILIAR_CHANNELS__LOOP__URL", "http://127.0.0.1:1234")
    config = load_config(tmp_path, channel_plugins=plugins())
    loop = config.channels.enabled()["loop"]
    assert isinstance(loop, LoopConfig)
    assert loop.token.get_secret_value() == TOKEN
    assert loop.url == "http://127.0.0.1:1234"  # env beats the file
    assert set(config.channels.enabled()) == {"cli", "ui", "loop"}
    assert config.channels.model_extra is not None and "someday" in config.channels.model_extra
    assert TOKEN not in repr(config)
    [channel] = build_channels(config.channels.enabled(), plugins())
    assert isinstance(channel, LoopChannel) and channel.config is loop


@pytest.mark.parametrize(
    ("toml", "key", "fragment"),
    [
        ("[channels.loop]\nenabled = true\ntokn = 'x'\n", "channels.loop.tokn", "Extra inputs"),
        ("[channels.loop]\nenabled = 'maybe'\n", "channels.loop.enabled", "valid boolean"),
        ("[channels.ghost]\nenabled = true\n", "channels.ghost", "no package provides it"),
        ("[channels.gone]\nenabled = true\n", "channels.gone", "cannot be imported"),
        ("[channels.cli]\nenabled = false\n", "channels.cli.enabled", "True"),
    ],
)
def test_bad_channel_tables_name_the_key(
    tmp_path: Path, toml: str, key: str, fragment: str
) -> None:
    write(tmp_path, toml)
    with pytest.raises(ConfigError) as caught:
        load_config(tmp_path, channel_plugins=plugins(_ep("gone", "no_such_module_xyz:x")))
    assert caught.value.key == key
    assert key in str(caught.value) and fragment in str(caught.value)


def test_env_can_enable_a_channel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAMILIAR_CHANNELS__LOOP__ENABLED", "true")
    monkeypatch.setenv("FAMILIAR_CHANNELS__GHOST__ENABLED", "true")
    with pytest.raises(ConfigError) as caught:
        load_config(tmp_path, channel_plugins=plugins())
    assert caught.value.key == "channels.ghost"
    monkeypatch.delenv("FAMILIAR_CHANNELS__GHOST__ENABLED")
    assert "loop" in load_config(tmp_path, channel_plugins=plugins()).channels.enabled()


def test_a_refused_create_is_a_config_error(tmp_path: Path) -> None:
    write(tmp_path, "[channels.loop]\nenabled = true\nfail_create = true\n")
    config = load_config(tmp_path, channel_plugins=plugins())
    with pytest.raises(ConfigError, match="fail_create is set") as caught:
        build_channels(config.channels.enabled(), plugins())
    assert caught.value.key == "channels.loop"


def test_init_documents_each_installed_channel(tmp_path: Path) -> None:
    model = config_model(plugins())
    text = render_default_config(model)
    section = text[text.index("[channels.loop]") :]
    assert "# The loopback test platform." in text
    assert "# Where the platform listens.\n# url = 'http://127.0.0.1:9'" in section
    assert "# Start this channel with the gateway.\n# enabled = false" in section
    assert "[channels.cli]" in text
    # Every value uncommented is the default again (and parses with the plugin's model).
    uncommented = _uncomment(text)
    tomllib.loads(uncommented)
    write(tmp_path, uncommented)
    loaded = load_config(tmp_path, channel_plugins=plugins())
    assert loaded.model_dump() == model().model_dump()


def _uncomment(text: str) -> str:
    """Every ``# key = value`` assignment (also multi-line lists) made live."""
    lines = []
    in_value = False
    for line in text.splitlines():
        assignment = re.match(r"# ([a-z_]+) = (.*)", line)
        if re.fullmatch(r"# \[[\w.\"-]+\]", line):  # a section header
            lines.append(line[2:])
        elif assignment and "(not set)" not in line:
            lines.append(line[2:])
            in_value = assignment.group(2) == "["
        elif in_value:
            lines.append(line[2:])
            in_value = line != "# ]"
        else:
            lines.append(line)
    return "\n".join(lines)


def test_default_config_has_the_built_in_tables() -> None:
    assert FamiliarConfig().model_dump()["channels"] == {
        "cli": {"enabled": True},
        "ui": {"enabled": True},
    }


def test_masked_config_masks_plugin_secrets_and_url_credentials(tmp_path: Path) -> None:
    write(
        tmp_path,
        f'[channels.loop]\ntoken = "{TOKEN}"\nurl = "https://bot:hunter2@chat.example/x?api-key=k1&v=2"\n'
        '[channels.someday]\nanswer = "maybe-a-secret"\nretries = 3\n',
    )
    config = load_config(
        tmp_path,
        channel_plugins=plugins(),
        provider=ProviderConfig(kind="openai", api_key=SecretStr("sk-a")),
    )
    masked = masked_config(
        config, store_url="postgresql+asyncpg://me:pw@db/f", workspace=Path("/w")
    )
    text = json.dumps(masked)
    for secret in (TOKEN, "hunter2", "k1", "sk-a", "maybe-a-secret", ":pw@"):
        assert secret not in text
    loop = masked["channels"]["loop"]
    assert loop["token"] == MASK
    assert loop["url"] == f"https://bot:{MASK}@chat.example/x?api-key={MASK}&v=2"
    assert masked["channels"]["someday"] == {"enabled": False, "answer": MASK, "retries": 3}
    assert masked["store"]["url"] == f"postgresql+asyncpg://me:{MASK}@db/f"
    assert masked["workspace"] == "/w"
    assert masked["provider"]["api_key"] == MASK


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("sqlite+aiosqlite:////tmp/f.db", "sqlite+aiosqlite:////tmp/f.db"),
        ("postgresql+asyncpg://postgres@db/f", "postgresql+asyncpg://postgres@db/f"),
        ("http://u:p@h:1/v1", f"http://u:{MASK}@h:1/v1"),
        ("https://h/x?key=abc", f"https://h/x?key={MASK}"),
        (
            "https://h/x?sig=abc&token=t&page=2#top",
            f"https://h/x?sig={MASK}&token={MASK}&page=2#top",
        ),
        ("https://h/x?flag&a=1", "https://h/x?flag&a=1"),
        ("http://[::1/", MASK),
    ],
)
def test_mask_url(url: str, expected: str) -> None:
    assert mask_url(url) == expected
