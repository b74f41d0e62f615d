"""The web panel's logins: single-use, short-lived tokens; sessions; CSRF tokens."""

from __future__ import annotations

import pytest

from gateway.ui.auth import UiAuth
from gateway.ui_config import UiConfig


class Seconds:
    """A monotonic clock the test moves."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Seconds:
    return Seconds()


@pytest.fixture
def auth(clock: Seconds) -> UiAuth:
    return UiAuth(UiConfig(login_token_seconds=120, session_hours=1), clock=clock)


def test_a_token_logs_in_once(auth: UiAuth) -> None:
    token = auth.issue("alice")
    session = auth.redeem(token)
    assert session is not None and session.operator == "alice"
    assert auth.session(session.id) == session
    assert auth.redeem(token) is None


def test_an_expired_token_is_refused_and_spent(auth: UiAuth, clock: Seconds) -> None:
    late, in_time = auth.issue("alice"), auth.issue("alice")
    clock.now += 119.9
    assert auth.redeem(in_time) is not None
    clock.now += 0.1  # exactly 120 s after issue
    assert auth.redeem(late) is None
    assert auth.redeem(late) is None


def test_unknown_tokens_and_cookies_are_refused(auth: UiAuth) -> None:
    auth.issue("alice")
    assert auth.redeem("") is None
    assert auth.redeem("guessed") is None
    assert auth.session(None) is None
    assert auth.session("forged") is None


def test_a_session_ends_after_its_hours_or_at_logout(auth: UiAuth, clock: Seconds) -> None:
    first = auth.redeem(auth.issue("alice"))
    second = auth.redeem(auth.issue("bob"))
    assert first is not None and second is not None
    auth.end(second)
    assert auth.session(second.id) is None
    clock.now += 3599
    assert auth.session(first.id) == first
    clock.now += 1
    assert auth.session(first.id) is None


def test_the_csrf_token_is_the_sessions_own(auth: UiAuth) -> None:
    mine = auth.redeem(auth.issue("alice"))
    other = auth.redeem(auth.issue("alice"))
    assert mine is not None and other is not None
    assert mine.csrf != other.csrf and mine.id != other.id
    assert UiAuth.csrf_ok(mine, mine.csrf)
    assert not UiAuth.csrf_ok(mine, other.csrf)
    assert not UiAuth.csrf_ok(mine, None)
    assert not UiAuth.csrf_ok(mine, "")


@pytest.mark.parametrize("operator", ["", "a b", "x" * 65, "../root", "-rf"])
def test_the_operator_must_be_a_user_name(auth: UiAuth, operator: str) -> None:
    with pytest.raises(ValueError, match="operator must match"):
        auth.issue(operator)


def test_unused_tokens_and_sessions_are_bounded(auth: UiAuth) -> None:
    tokens = [auth.issue("alice") for _ in range(40)]
    assert auth.redeem(tokens[0]) is None  # the oldest made room
    assert auth.redeem(tokens[-1]) is not None
    sessions = [auth.redeem(auth.issue("alice")) for _ in range(70)]
    assert all(s is not None for s in sessions)
    assert auth.session(sessions[0].id if sessions[0] else None) is None
    assert auth.session(sessions[-1].id if sessions[-1] else None) is not None


def test_login_urls_name_a_reachable_address(auth: UiAuth) -> None:
    auth.listening_on("0.0.0.0", 8787)
    assert auth.base_url == "http://127.0.0.1:8787"
    auth.listening_on("::1", 8788)
    assert auth.base_url == "http://[::1]:8788"
    auth.listening_on("192.0.2.7", 80)
    assert auth.base_url == "http://192.0.2.7:80"


def test_behind_a_tls_proxy_the_public_url_is_the_panels_origin() -> None:
    direct = UiAuth(UiConfig())
    direct.listening_on("0.0.0.0", 8787)
    assert direct.base_url == "http://127.0.0.1:8787"
    assert direct.origin_ok(None, "http://127.0.0.1:8787")
    assert direct.origin_ok("null", "http://127.0.0.1:8787")
    assert direct.origin_ok("http://127.0.0.1:8787", "http://127.0.0.1:8787")
    assert not direct.origin_ok("https://panel.example.com", "http://127.0.0.1:8787")
    assert not direct.secure_cookie

    proxied = UiAuth(UiConfig(public_url="https://panel.example.com/"))
    proxied.listening_on("127.0.0.1", 8787)
    assert proxied.base_url == "https://panel.example.com"  # login URLs point there
    assert proxied.origin_ok("https://panel.example.com", "http://127.0.0.1:8787")
    assert proxied.origin_ok("http://127.0.0.1:8787", "http://127.0.0.1:8787")
    assert not proxied.origin_ok("https://evil.example", "http://127.0.0.1:8787")
    assert not proxied.origin_ok("http://panel.example.com", "http://127.0.0.1:8787")
    assert proxied.secure_cookie


@pytest.mark.parametrize(
    "given",
    [
        "panel.example.com",
        "ftp://panel.example.com",
        "https://panel.example.com/ui",
        "https://panel.example.com/?a=1",
        "https://user:pw@panel.example.com",
        "https://",
    ],
)
def test_a_public_url_is_an_origin_or_refused(given: str) -> None:
    with pytest.raises(ValueError, match="is not a panel address"):
        UiConfig(public_url=given)
    assert UiConfig(public_url="http://10.0.0.5:8443").public_url == "http://10.0.0.5:8443"
