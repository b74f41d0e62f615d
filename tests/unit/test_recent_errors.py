"""The System page's recent errors: warnings and errors only, newest first, and no
credential a library's message quoted."""

from __future__ import annotations

import logging

from gateway.recent_errors import RecentErrors


def test_keeps_warnings_newest_first_with_credentials_masked() -> None:
    recent = RecentErrors(keep=2)
    log = logging.getLogger("tests.recent_errors")
    log.addHandler(recent)
    log.propagate = False
    try:
        log.info("not kept")
        log.warning("first")
        log.error(
            "GET %s failed:\n  401",
            "https://user:hunter2@api.example.com/v1?token=abc&x=1",
        )
        log.warning("bot token xoxb-1234567890-abcdefghijklmnopqrstuv rejected")
    finally:
        log.removeHandler(recent)
    messages = [r["message"] for r in recent.recent()]
    assert len(messages) == 2  # the oldest went
    assert messages[0].startswith("bot token ") and "abcdefghijklmnop" not in messages[0]
    assert "hunter2" not in messages[1] and "abc&" not in messages[1]
    assert messages[1].endswith("failed: 401")  # one line
    assert [r["level"] for r in recent.recent()] == ["warning", "error"]
