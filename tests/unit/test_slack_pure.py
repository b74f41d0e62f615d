"""The Slack channel's pure parts: session keys, event filtering, mrkdwn, splitting."""

from __future__ import annotations

from pathlib import Path

import aiohttp
import pytest
import yaml
from pydantic import SecretStr, ValidationError

import channels.slack
from channels.slack.api import REQUIRED_SCOPES, SlackError, SlackRateLimited, _retry_after
from channels.slack.config import SlackConfig
from channels.slack.files import FileFetcher
from channels.slack.intake import BotIdentity, command_text, from_event
from channels.slack.render import error_line, split, to_mrkdwn
from core.errors import RetryLater

ME = BotIdentity(team_id="T1", user_id="UBOT", bot_id="BBOT")


def _event(**fields: object) -> dict[str, object]:
    return {"type": "message", "channel": "C1", "user": "U1", "text": "hi", "ts": "1.1", **fields}


def test_session_keys() -> None:
    def key(kind: str = "message", **fields: object) -> str | None:
        found = from_event(
            _event(**fields), kind=kind, team="T1", event_id="E", me=ME, respond_to_bots=False
        )
        return found.session_key if found else None

    assert key(channel="D1") == "slack:T1:D1"
    assert key(channel="D1", thread_ts="0.5") == "slack:T1:D1:0.5"
    assert key("app_mention", text="<@UBOT> hi") == "slack:T1:C1:1.1"
    assert key("app_mention", text="<@UBOT> hi", thread_ts="0.5") == "slack:T1:C1:0.5"
    assert key() is None  # a top-level channel message without a mention
    assert key(text="<@UBOT> hi", thread_ts="0.5") is None  # the app_mention answers it
    assert key("app_mention", channel="D1") is None  # the DM's message event answers it


def test_a_top_level_dm_is_answered_inline_unless_configured() -> None:
    def thread(config: SlackConfig, kind: str = "message", **fields: object) -> str | None:
        found = from_event(
            _event(**fields), kind=kind, team="T1", event_id="E", me=ME, respond_to_bots=False
        )
        assert found is not None
        return found.reply_thread(config)

    default = SlackConfig()
    assert thread(default, channel="D1") is None  # inline in the DM
    assert thread(default, channel="D1", thread_ts="0.5") == "0.5"  # a thread stays one
    assert thread(default, "app_mention", text="<@UBOT> hi") == "1.1"  # channels: a thread
    dm_threads = SlackConfig(dm_reply_in_thread=True)
    assert thread(dm_threads, channel="D1") == "1.1"
    channel_inline = SlackConfig(reply_in_thread=False)
    assert thread(channel_inline, "app_mention", text="<@UBOT> hi") is None
    assert thread(channel_inline, "app_mention", text="<@UBOT> hi", thread_ts="0.5") == "0.5"
    assert thread(channel_inline, channel="D1") is None


@pytest.mark.parametrize(
    "fields",
    [
        {"channel": "D1", "user": "UBOT"},
        {"channel": "D1", "subtype": "message_changed"},
        {"channel": "D1", "subtype": "message_deleted"},
        {"channel": "D1", "bot_id": "BOTHER", "subtype": "bot_message"},
    ],
)
def test_ignored(fields: dict[str, object]) -> None:
    assert (
        from_event(
            _event(**fields), kind="message", team="T1", event_id="E", me=ME, respond_to_bots=False
        )
        is None
    )


def test_other_bots_when_allowed_and_text_cleanup() -> None:
    found = from_event(
        _event(
            channel="D1",
            bot_id="BOTHER",
            subtype="bot_message",
            text="<@UBOT> see <https://a.b/c|docs> &amp; <#C9|general>",
        ),
        kind="message",
        team="T1",
        event_id="E",
        me=ME,
        respond_to_bots=True,
    )
    assert found is not None and found.text == "see docs (https://a.b/c) & #general"


def test_familiar_command_text() -> None:
    assert command_text("every 1d check") == "/every 1d check"
    assert command_text("/schedules") == "/schedules"
    assert command_text("what is up") == "what is up"
    assert command_text("  ") == "/help"


def test_mrkdwn() -> None:
    md = "# Plan\n**bold**, *it*, ~~old~~, [x](https://e.x) <3\n- a\n```py\nif a < b: pass\n```"
    assert to_mrkdwn(md) == (
        "*Plan*\n*bold*, _it_, ~old~, <https://e.x|x> &lt;3\n• a\n```\nif a &lt; b: pass\n```"
    )


def test_split_keeps_code_blocks_whole_and_fenced() -> None:
    text = "intro\n\n```\n" + "line\n" * 300 + "```\n\n" + "tail " * 100
    parts = split(text, limit=500)
    assert all(len(p) <= 500 for p in parts)
    assert all(p.count("```") % 2 == 0 for p in parts)
    assert "".join(parts).count("line") == 300
    assert split("short") == ["short"]


def test_error_is_one_line() -> None:
    assert error_line("boom\nTraceback (most recent call last):\n  ...") == ":warning: boom"


def test_tokens_required_per_mode() -> None:
    with pytest.raises(ValidationError, match=r"channels\.slack\.app_token"):
        SlackConfig(enabled=True, bot_token=SecretStr("xoxb-1"))
    with pytest.raises(ValidationError, match=r"channels\.slack\.signing_secret"):
        SlackConfig(enabled=True, mode="http", bot_token=SecretStr("xoxb-1"))
    with pytest.raises(ValidationError, match=r"channels\.slack\.bot_token"):
        SlackConfig(enabled=True, app_token=SecretStr("xapp-1"))
    SlackConfig()  # not enabled: nothing needed


async def test_the_bot_token_only_goes_to_slack_file_origins() -> None:
    """A file URL on another host, or Slack's host without https, is never fetched."""
    async with aiohttp.ClientSession() as session:
        fetcher = FileFetcher(
            session=session, token="xoxb-t", api_url="http://127.0.0.1:9/api/", max_bytes=1000
        )
        refused = [
            "https://evil.example/x.txt",
            "http://files.slack.com/x.txt",
            "https://files.slack.com@evil.example/x.txt",
            "https://127.0.0.1:9/x.txt",
        ]
        files = [
            {"name": f"f{i}.txt", "mimetype": "text/plain", "size": 5, "url_private": url}
            for i, url in enumerate(refused)
        ]
        fetched = await fetcher.fetch(files, budget=1.0)
    assert fetched.text.count("no downloadable URL") == len(refused)


def test_the_manifest_holds_the_scopes_and_events_the_channel_uses() -> None:
    text = (Path(channels.slack.__file__).parent / "manifest.yaml").read_text()
    manifest = yaml.safe_load(text)
    scopes = manifest["oauth_config"]["scopes"]["bot"]
    assert len(scopes) == len(set(scopes)) and set(REQUIRED_SCOPES) <= set(scopes)
    assert set(scopes) == {
        *REQUIRED_SCOPES,  # mentions, DMs, replies: posted, streamed, edited (chat:write)
        "channels:history",  # thread replies in public channels
        "groups:history",  # ... and private ones
        "files:read",  # attached text files
        "commands",  # /familiar
        "assistant:write",  # assistant.threads.setStatus
    }
    events = manifest["settings"]["event_subscriptions"]["bot_events"]
    assert set(events) == {
        "app_mention",
        "message.im",
        "message.channels",
        "message.groups",
        "assistant_thread_started",  # comes with the assistant feature; ignored
    }
    for event in events:  # every message.<kind> event has its <kind>:history scope
        if event.startswith("message."):
            assert f"{event.removeprefix('message.')}:history" in scopes
    assert [c["command"] for c in manifest["features"]["slash_commands"]] == ["/familiar"]
    assert "assistant_view" in manifest["features"]
    assert manifest["settings"]["socket_mode_enabled"] is True  # the default mode
    # HTTP mode: the two URLs to uncomment point at the gateway's route.
    assert text.count("# url: https://") == 1 and text.count("# request_url: https://") == 1
    assert text.count("/slack/events") == 3


def test_a_rate_limit_is_a_slack_error_the_outbox_waits_out() -> None:
    exc = SlackRateLimited("chat.postMessage failed: ratelimited", retry_after=3)
    assert isinstance(exc, SlackError) and isinstance(exc, RetryLater)
    assert (exc.error, exc.retry_after) == ("ratelimited", 3)
    assert _retry_after({"Retry-After": ["7"]}) == 7 and _retry_after({"retry-after": "x"}) == 1
