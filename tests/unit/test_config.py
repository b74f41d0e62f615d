"""Loading config.toml + FAMILIAR_* env vars: precedence, and errors that name the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.errors import ConfigError
from gateway.config import load_config
from gateway.init import render_default_config


def write(home: Path, text: str) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(text, encoding="utf-8")


def test_defaults_without_a_file(tmp_path: Path) -> None:
    config = load_config(tmp_path / "nothing-here")
    assert config.agent.max_iterations == 20
    assert config.agent.max_concurrent_sessions == 32
    assert config.http.port == 8787
    assert config.provider.kind is None


def test_file_then_env_then_overrides(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(
        tmp_path,
        '[agent]\nmax_iterations = 7\n[provider]\nkind = "scripted"\n[http]\nport = 9000\n',
    )
    monkeypatch.setenv("FAMILIAR_HTTP__PORT", "9100")
    monkeypatch.setenv("FAMILIAR_AGENT__CONTEXT__TIMEZONE", "Europe/Berlin")
    config = load_config(tmp_path, scheduler={"misfire_grace": 1})
    assert config.agent.max_iterations == 7  # from the file
    assert config.http.port == 9100  # env beats the file
    assert config.agent.context.timezone == "Europe/Berlin"
    assert config.provider.kind == "scripted"
    assert config.scheduler.misfire_grace == 1  # explicit overrides beat both


@pytest.mark.parametrize(
    ("toml", "key", "fragment"),
    [
        ("[agent]\nmax_iterations = 'many'\n", "agent.max_iterations", "valid integer"),
        ("[agent]\nmax_iteration = 3\n", "agent.max_iteration", "Extra inputs"),
        ("[nonsense]\nx = 1\n", "nonsense", "Extra inputs"),
        ('[provider]\nkind = "gpt"\n', "provider.kind", "openai"),
        ('[scheduler]\ntimezone = "Mars/Base"\n', "scheduler.timezone", "Mars/Base"),
        ("[http]\nport = 70000\n", "http.port", "65535"),
        ('[gateway]\nchannel_processes = "each"\n', "gateway.channel_processes", "per-channel"),
        (
            '[gateway]\nprocesses = "single"\nchannel_processes = "per-channel"\n',
            "gateway",
            'needs processes = "main" or "multi"',
        ),
    ],
)
def test_bad_values_name_the_key(tmp_path: Path, toml: str, key: str, fragment: str) -> None:
    write(tmp_path, toml)
    with pytest.raises(ConfigError) as caught:
        load_config(tmp_path)
    assert caught.value.key == key
    assert key in str(caught.value) and fragment in str(caught.value)


def test_channel_processes_default_one_and_per_channel_accepted(tmp_path: Path) -> None:
    assert load_config(tmp_path / "nothing-here").gateway.channel_processes == "one"
    assert "\n# channel_processes = 'one'\n" in render_default_config()  # familiar init
    write(tmp_path, '[gateway]\nchannel_processes = "per-channel"\n')
    assert load_config(tmp_path).gateway.per_channel


def test_bad_env_value_names_the_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAMILIAR_AGENT__MAX_CONCURRENT_SESSIONS", "lots")
    with pytest.raises(ConfigError) as caught:
        load_config(tmp_path)
    assert caught.value.key == "agent.max_concurrent_sessions"


def test_toml_syntax_error_names_the_file(tmp_path: Path) -> None:
    write(tmp_path, "[agent\n")
    with pytest.raises(ConfigError) as caught:
        load_config(tmp_path)
    assert "config.toml" in str(caught.value)


def test_secrets_are_masked_when_printed(tmp_path: Path) -> None:
    write(tmp_path, '[provider]\nkind = "openai"\napi_key = "sk-very-secret"\nmodel = "m"\n')
    config = load_config(tmp_path)
    assert "sk-very-secret" not in repr(config)
    assert config.provider.api_key is not None
    assert config.provider.api_key.get_secret_value() == "sk-very-secret"
