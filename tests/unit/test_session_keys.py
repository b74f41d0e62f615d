"""The one session-name rule: CLI names and full session keys."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from channels.webhook.models import WebhookRequest
from core.session_keys import (
    check_cli_key,
    check_cli_name,
    check_session_key,
    check_ui_key,
    cli_key,
    session_key_for,
    ui_key,
)


@pytest.mark.parametrize("name", ["a", "default", "A-z_0.9@+=", "n" * 128, "7days"])
def test_good_cli_names(name: str) -> None:
    assert check_cli_name(name) == name
    assert cli_key(name) == f"cli:{name}"
    assert check_cli_key(f"cli:{name}") == name
    assert session_key_for(name) == f"cli:{name}"


@pytest.mark.parametrize("name", ["", "a b", "x/y", "n" * 129, "émoji", ".hidden", "-x", "a:b"])
def test_bad_cli_names(name: str) -> None:
    with pytest.raises(ValueError, match=r"1-128 letters, digits or \._@"):
        check_cli_name(name)


@pytest.mark.parametrize(
    "key",
    ["cli:x", "slack:T1:C2:1712.5", "teams:19:abc@thread.v2", "subagent:ab12", "x:" + "y" * 510],
)
def test_good_session_keys(key: str) -> None:
    assert check_session_key(key) == key
    assert session_key_for(f" {key} ") == key


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        ("x:" + "y" * 511, "at most 512"),
        ("nocolon", "<channel>:<name>"),
        (":x", "<channel>:<name>"),
        ("slack:", "<channel>:<name>"),
        ("slack:a b", "no spaces"),
        ("slack:a\tb", "no spaces"),
        ("slack:a\x00b", "no spaces"),
        ("cli:a/b", "session name"),
        ("ui:a/b", "session name"),
    ],
)
def test_bad_session_keys(key: str, expected: str) -> None:
    with pytest.raises(ValueError, match=expected):
        check_session_key(key)


def test_a_cli_key_must_be_cli() -> None:
    with pytest.raises(ValueError, match="cli:NAME"):
        check_cli_key("slack:x")


GOOD_NAMES = ["a", "default", "A-z_0.9@+=", "n" * 128, "7days"]
BAD_NAMES = ["", "a b", "x/y", "n" * 129, "émoji", ".hidden", "-x", "a:b", "a\n"]


@pytest.mark.parametrize("name", GOOD_NAMES)
def test_webhook_sessions_take_every_good_name(name: str) -> None:
    assert WebhookRequest(text="hi", session=name).session == check_cli_name(name)


@pytest.mark.parametrize("name", BAD_NAMES)
def test_webhook_sessions_refuse_what_the_rule_refuses(name: str) -> None:
    with pytest.raises(ValueError):
        check_cli_name(name)
    with pytest.raises(ValidationError):
        WebhookRequest(text="hi", session=name)


def test_ui_keys_carry_a_session_name() -> None:
    assert ui_key("web") == "ui:web" and check_ui_key("ui:web") == "web"
    assert check_session_key("ui:web") == "ui:web"
    with pytest.raises(ValueError, match="ui:NAME"):
        check_ui_key("cli:web")
    with pytest.raises(ValueError, match="session name"):
        ui_key("a b")
