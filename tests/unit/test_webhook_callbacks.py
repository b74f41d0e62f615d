"""Callback URLs are normalised before the prefix check, and what cannot be is refused."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from channels.webhook.callbacks import CallbackRefused, allowed_callback, normalise_url
from channels.webhook.config import HookConfig

PREFIX = "https://ci.example.com/cb/"


@pytest.mark.parametrize(
    ("url", "normal"),
    [
        ("https://ci.example.com/cb/x", "https://ci.example.com/cb/x"),
        ("HTTPS://CI.Example.COM/cb/x", "https://ci.example.com/cb/x"),
        ("https://ci.example.com:443/cb/x", "https://ci.example.com/cb/x"),
        ("http://ci.example.com:80/", "http://ci.example.com/"),
        ("http://ci.example.com:8080/a", "http://ci.example.com:8080/a"),
        ("https://ci.example.com", "https://ci.example.com/"),
        ("https://ci.example.com/cb/./x", "https://ci.example.com/cb/x"),
        ("https://ci.example.com/cb/../x", "https://ci.example.com/x"),
        ("https://ci.example.com/cb/../../x", "https://ci.example.com/x"),
        ("https://ci.example.com/cb/%2e%2e/x", "https://ci.example.com/x"),
        ("https://ci.example.com/cb/.%2E/x", "https://ci.example.com/x"),
        ("https://ci.example.com/cb/%2E/x", "https://ci.example.com/cb/x"),
        ("https://ci.example.com/cb/a/..", "https://ci.example.com/cb/"),
        ("https://ci.example.com/cb/%7euser/%41", "https://ci.example.com/cb/~user/A"),
        (
            "https://ci.example.com/cb/a%20b?q=%2f&r=%7E",
            "https://ci.example.com/cb/a%20b?q=%2F&r=~",
        ),
        ("https://ci.example.com/cb/x#frag", "https://ci.example.com/cb/x"),
        ("http://[::1]:9000/cb/", "http://[::1]:9000/cb/"),
    ],
)
def test_normal_forms(url: str, normal: str) -> None:
    assert normalise_url(url) == normal
    assert normalise_url(normal) == normal  # a fixed point


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("ftp://ci.example.com/cb/", "http"),
        ("https://user:pw@ci.example.com/cb/", "credentials"),
        ("https://ci.example.com@evil.example/cb/", "credentials"),
        ("https://ci.example.com/cb/..%2f..%2fx", "encoded '/'"),
        ("https://ci.example.com/cb/..%5Cx", "encoded '/'"),
        ("https://ci.example.com/cb\\..\\x", "backslash"),
        ("https://ci.example.com/cb/ x", "whitespace"),
        ("https://ci.example.com/cb/\tx", "whitespace"),
        ("https://ci.example.com/cb/%zz", "'%'"),
        ("https://ci.example.com:99999/cb/", "not a URL"),
        ("https:///cb/", "no host"),
    ],
)
def test_what_cannot_be_normalised_is_refused(url: str, why: str) -> None:
    with pytest.raises(CallbackRefused, match=why):
        normalise_url(url)


@pytest.mark.parametrize(
    "url",
    [
        "https://ci.example.com/cb/../../x",
        "https://ci.example.com/cb/%2e%2e/x",
        "https://ci.example.com/cb/.%2e/admin",
        "https://ci.example.com/cbx",
        "https://ci.example.com.evil.example/cb/",
        "http://ci.example.com/cb/",
    ],
)
def test_a_url_outside_the_prefix_after_normalising_is_not_allowed(url: str) -> None:
    assert allowed_callback(url, [PREFIX]) is None


def test_an_allowed_url_comes_back_in_its_normal_form() -> None:
    url = "HTTPS://CI.EXAMPLE.COM:443/cb/./jobs/../build%2D7"
    assert allowed_callback(url, [PREFIX]) == "https://ci.example.com/cb/build-7"
    assert allowed_callback(url, ["HTTPS://Ci.Example.com/cb/"]) is not None


def test_a_prefix_that_cannot_be_normalised_is_a_config_error() -> None:
    with pytest.raises(ValidationError, match="credentials"):
        HookConfig(secret="s", callback_allow=["https://u:p@ci.example.com/cb/"])  # type: ignore[arg-type]
    assert HookConfig(secret="s", callback_allow=["HTTPS://ci.example.com/cb/"])  # type: ignore[arg-type]
