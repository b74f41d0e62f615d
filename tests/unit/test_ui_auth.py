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
