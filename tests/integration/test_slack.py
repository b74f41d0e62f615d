"""The Slack channel in the real gateway: bolt against the fake Slack, on loopback."""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path

import pytest

from channels.slack import REFUSAL
from channels.slack.channel import STORE_REFUSAL
from channels.slack.render import to_mrkdwn
from gateway.daemon import EX_CONFIG, serve
from tests.fakes.fake_openai import Delay, FakeOpenAI, Text
from tests.fakes.fake_slack import FakeSlack, event_body
from tests.integration.slack_rig import (
    SLACK,
    Gateway,
    dm,
    gateway,
    mention,
    overrides,
)
from tests.small_disk import fill, small_disk
from tests.waiting import eventually


@pytest.fixture
def home(daemon_home: Path) -> Path:
    return daemon_home


@pytest.fixture(autouse=True)
def _restore_logging(restore_root_logging: None) -> None:
    """Tests here run the daemon in-process."""


async def test_a_dm_is_answered_inline_and_a_mention_in_a_thread(home: Path) -> None:
    async with (
        FakeSlack() as slack,
        FakeOpenAI() as llm,
        gateway(home, overrides(slack, llm)) as gw,
    ):
        await gw.running()
        llm.script(Text("Hi **Alice**, see [docs](https://x.example/d)"))
        status, _, _ = await gw.post_event(event_body(dm("hello", ts="100.1")))
        assert status == 200
        [reply] = await slack.wait_for("chat.postMessage", channel="DALICE")
        assert "thread_ts" not in reply.args  # a top-level DM is answered in the DM
        assert reply.args["text"] == "Hi *Alice*, see <https://x.example/d|docs>"

        status, _, _ = await gw.post_event(event_body(mention("ping", ts="200.1")))
        assert status == 200
        [reply] = await slack.wait_for("chat.postMessage", thread_ts="200.1")
        assert (reply.args["channel"], reply.args["text"]) == ("CGENERAL", "echo: ping")

        # A reply in that thread, without a mention, continues the thread's session.
        follow = {
            "type": "message",
            "channel": "CGENERAL",
            "channel_type": "channel",
            "user": "UALICE",
            "text": "and again",
            "ts": "201.1",
            "thread_ts": "200.1",
        }
        await gw.post_event(event_body(follow))
        await slack.wait_for("chat.postMessage", 2, thread_ts="200.1")
        # ... but a thread the bot is not part of is left alone.
        stranger = {**follow, "ts": "301.1", "thread_ts": "300.1", "text": "not for you"}
        await gw.post_event(event_body(stranger))
        sessions = [entry["session"] for entry in llm.log]
    assert sessions[1] == sessions[2] == "slack:T1:CGENERAL:200.1"
    assert sessions[0] == "slack:T1:DALICE"
    assert len(llm.log) == 3 and not slack.posts(thread_ts="300.1")


async def test_bad_or_stale_signatures_get_401_and_nothing_is_queued(home: Path) -> None:
    async with (
        FakeSlack() as slack,
        FakeOpenAI() as llm,
        gateway(home, overrides(slack, llm)) as gw,
    ):
        await gw.running()
        status, _, _ = await gw.post_event(event_body(dm("forged", ts="1.1")), secret="wrong")
        assert status == 401
        stale = await gw.post_event(event_body(dm("old", ts="1.2")), timestamp=1_000_000)
        assert stale[0] == 401
        # A good event of the same conversation is handled after anything queued before.
        assert (await gw.post_event(event_body(dm("marker", ts="1.3"))))[0] == 200
        await slack.wait_for("chat.postMessage", channel="DALICE")
        report = await gw.status()
    assert [e["user_text"] for e in llm.log] == ["marker"]
    assert [p.args["text"] for p in slack.posts()] == ["echo: marker"]
    assert report["queue"] == {"pending": 0, "claimed": 0}


async def test_url_verification_is_answered(home: Path) -> None:
    async with FakeSlack() as slack, gateway(home, overrides(slack, None)) as gw:
        await gw.running()
        body = {"type": "url_verification", "challenge": "abc123", "token": "x"}
        status, _, text = await gw.post_event(body)
    assert status == 200 and "abc123" in text


async def test_a_retried_event_is_answered_once(home: Path) -> None:
    async with (
        FakeSlack() as slack,
        FakeOpenAI() as llm,
        gateway(home, overrides(slack, llm)) as gw,
    ):
        await gw.running()
        body = event_body(dm("once please !sleep 0.5", ts="5.1"))
        first = await gw.post_event(body)
        retry = await gw.post_event(
            body, headers={"X-Slack-Retry-Num": "1", "X-Slack-Retry-Reason": "http_timeout"}
        )
        assert first[0] == retry[0] == 200
        await slack.wait_for("chat.postMessage", channel="DALICE")
        # A second run of the retried event would come before this one (one session).
        await gw.post_event(event_body(dm("marker", ts="5.2")))
        await slack.wait_for("chat.postMessage", 2, channel="DALICE")
    assert [p.args["text"] for p in slack.posts(channel="DALICE")][1:] == ["echo: marker"]
    assert len(slack.posts(channel="DALICE")) == 2
    assert len(llm.log) == 2


async def test_socket_mode_dm_and_a_redelivered_envelope_answer_once(home: Path) -> None:
    async with (
        FakeSlack() as slack,
        FakeOpenAI() as llm,
        gateway(home, overrides(slack, llm, mode="socket")) as gw,
    ):
        await gw.running()
        body = event_body(dm("over the socket", ts="7.1"))
        ack = await slack.envelope("events_api", body, envelope_id="env-1")
        again = await slack.envelope("events_api", body, envelope_id="env-1", retry_attempt=1)
        assert ack["envelope_id"] == again["envelope_id"] == "env-1"
        [reply] = await slack.wait_for("chat.postMessage", channel="DALICE", thread_ts=None)
        assert reply.args["text"] == "echo: over the socket"
        # A second run of the envelope would come before this one (one session).
        await slack.envelope("events_api", event_body(dm("marker", ts="7.2")), envelope_id="env-2")
        await slack.wait_for("chat.postMessage", 2, channel="DALICE", thread_ts=None)
    assert [p.args["text"] for p in slack.posts(channel="DALICE")] == [
        "echo: over the socket",
        "echo: marker",
    ]
    assert len(llm.log) == 2


async def test_the_familiar_slash_command_over_the_socket(home: Path) -> None:
    async with (
        FakeSlack() as slack,
        gateway(home, overrides(slack, None, mode="socket")) as gw,
    ):
        await gw.running()
        command = {
            "command": "/familiar",
            "text": "help",
            "channel_id": "CGENERAL",
            "user_id": "UALICE",
            "team_id": "T1",
            "trigger_id": "trig-1",
        }
        await slack.envelope("slash_commands", command)
        [anchor] = slack.posts(channel="CGENERAL")
        assert anchor.args["text"] == "<@UALICE>: /help"
        anchor_ts = await _ts_of(slack, 0)
        [reply] = await slack.wait_for("chat.postMessage", thread_ts=anchor_ts)
    assert "/every" in reply.args["text"]


async def _ts_of(slack: FakeSlack, index: int) -> str:
    # The fake numbers posts in order: the n-th post's ts.
    return f"{1_700_000_000 + index + 1}.000100"


async def test_two_threads_run_concurrently_as_two_sessions(home: Path) -> None:
    async with (
        FakeSlack() as slack,
        FakeOpenAI() as llm,
        gateway(home, overrides(slack, llm)) as gw,
    ):
        await gw.running()
        llm.script(Delay(1.5, Text("one")), Delay(1.5, Text("two")))
        started = asyncio.get_running_loop().time()
        await asyncio.gather(
            gw.post_event(event_body(mention("first", ts="10.1"))),
            gw.post_event(event_body(mention("second", ts="20.1"))),
        )
        await slack.wait_for("chat.postMessage", thread_ts="10.1")
        await slack.wait_for("chat.postMessage", thread_ts="20.1")
        took = asyncio.get_running_loop().time() - started
    assert took < 2.9, f"threads ran one after the other ({took:.2f}s)"
    assert {e["session"] for e in llm.log} == {"slack:T1:CGENERAL:10.1", "slack:T1:CGENERAL:20.1"}


async def test_progress_is_shown_and_updates_are_throttled(home: Path) -> None:
    async with (
        FakeSlack() as slack,
        FakeOpenAI() as llm,
        gateway(home, overrides(slack, llm)) as gw,
    ):
        await gw.running()
        answer = "word " * 60
        llm.script(Text(answer, chunk_chars=5, chunk_delay=0.05))  # ~3 s of streaming
        await gw.post_event(event_body(dm("write a lot", ts="30.1")))
        [placeholder] = await slack.wait_for("chat.postMessage", channel="DALICE", thread_ts=None)
        async with asyncio.timeout(30):
            while not any(c.args.get("text") == answer.strip() for c in slack.of("chat.update")):
                await asyncio.sleep(0.05)
        updates = slack.of("chat.update")
    assert len(slack.posts(channel="DALICE")) == 1  # the placeholder became the reply
    assert {u.args["ts"] for u in updates} == {await _ts_of(slack, 0)}
    assert placeholder.args["text"] != answer.strip()
    streamed = [u.at for u in updates[:-1]]  # the last one is the final text
    assert len(streamed) >= 2
    gaps = [b - a for a, b in zip([placeholder.at, *streamed], streamed, strict=False)]
    assert min(gaps) >= 0.9, gaps


async def test_a_reply_is_streamed_with_slacks_streaming_methods(home: Path) -> None:
    async with (
        FakeSlack(streaming=True) as slack,
        FakeOpenAI() as llm,
        gateway(home, overrides(slack, llm, dm_reply_in_thread=True)) as gw,
    ):
        await gw.running()
        answer = "word " * 60
        llm.script(Text(answer, chunk_chars=5, chunk_delay=0.05))  # ~3 s of streaming
        await gw.post_event(event_body(dm("write a lot", ts="31.1")))
        [stop] = await slack.wait_for("chat.stopStream")
    [start] = slack.of("chat.startStream")
    assert (start.args["thread_ts"], start.args["channel"]) == ("31.1", "DALICE")
    assert (start.args["recipient_user_id"], start.args["recipient_team_id"]) == ("UALICE", "T1")
    appends = slack.of("chat.appendStream")
    assert {c.args["ts"] for c in [*appends, stop]} == {await _ts_of(slack, 0)}
    assert len(appends) >= 1
    times = [start.at, *(a.at for a in appends)]
    assert min(b - a for a, b in itertools.pairwise(times)) >= 0.9, times
    # The stream holds the whole reply, once: no placeholder, no edit, no second post.
    assert [t.strip() for t in slack.thread("31.1")] == [answer.strip()]
    assert slack.posts() == [] and slack.of("chat.update") == []


async def test_where_slack_cannot_stream_a_placeholder_is_edited_instead(home: Path) -> None:
    async with (
        FakeSlack() as slack,  # chat.startStream: unknown_method
        FakeOpenAI() as llm,
        gateway(home, overrides(slack, llm, dm_reply_in_thread=True)) as gw,
    ):
        await gw.running()
        llm.script(Delay(1.5, Text("first")), Delay(1.5, Text("second")))
        await gw.post_event(event_body(dm("one", ts="33.1")))
        await slack.wait_for("chat.update", text="first")
        await gw.post_event(event_body(dm("two", ts="34.1")))
        await slack.wait_for("chat.update", text="second")
    # Refused once: the workspace is remembered as unable to stream (no retry storm).
    assert len(slack.of("chat.startStream")) == 1
    assert slack.thread("33.1") == ["first"] and slack.thread("34.1") == ["second"]


async def test_a_stream_failing_midway_still_ends_with_the_whole_reply_once(home: Path) -> None:
    async with (
        FakeSlack(
            streaming=True, fail={"chat.appendStream": 1}, fail_after={"chat.appendStream": 1}
        ) as slack,
        FakeOpenAI() as llm,
        gateway(home, overrides(slack, llm, dm_reply_in_thread=True)) as gw,
    ):
        await gw.running()
        answer = "**word** " * 60
        llm.script(Text(answer, chunk_chars=9, chunk_delay=0.05))
        await gw.post_event(event_body(dm("write a lot", ts="35.1")))
        [edit] = await slack.wait_for("chat.update")
    ts = await _ts_of(slack, 0)
    assert len(slack.of("chat.appendStream")) == 2  # one landed, one failed, no more tried
    whole = to_mrkdwn(answer.strip())
    assert edit.args["ts"] == ts and edit.args["text"] == whole
    assert slack.thread("35.1") == [whole] and slack.posts() == []


async def test_assistant_thread_status_where_available(home: Path) -> None:
    async with (
        FakeSlack(assistant=True) as slack,
        FakeOpenAI() as llm,
        gateway(home, overrides(slack, llm, dm_reply_in_thread=True)) as gw,
    ):
        await gw.running()
        llm.script(Delay(1.5, Text("done thinking")))
        await gw.post_event(event_body(dm("think", ts="40.1")))
        [status] = await slack.wait_for("assistant.threads.setStatus", thread_ts="40.1")
        [reply] = await slack.wait_for("chat.postMessage", thread_ts="40.1")
    assert status.args["status"] == "is thinking…" and status.args["channel_id"] == "DALICE"
    assert reply.args["text"] == "done thinking" and slack.of("chat.update") == []


async def test_a_rate_limited_post_is_retried(home: Path) -> None:
    async with (
        FakeSlack() as slack,
        FakeOpenAI() as llm,
        gateway(home, overrides(slack, llm)) as gw,
    ):
        await gw.running()
        slack.rate_limit["chat.postMessage"] = 1
        await gw.post_event(event_body(dm("busy?", ts="50.1")))
        posts = await slack.wait_for("chat.postMessage", 2, channel="DALICE")
    assert posts[1].at - posts[0].at >= 0.9  # Retry-After: 1 was waited out
    assert posts[1].args["text"] == "echo: busy?"


async def test_sustained_rate_limits_never_drop_a_reply(home: Path) -> None:
    async with (
        FakeSlack(retry_after=0) as slack,
        FakeOpenAI() as llm,
        gateway(home, overrides(slack, llm, send_attempts=2, dm_reply_in_thread=True)) as gw,
    ):
        await gw.running()
        # Each send meets three 429s (one and two retries in the client): four sends'
        # worth, where two failed sends would give the reply up.
        slack.rate_limit["chat.postMessage"] = 10
        await gw.post_event(event_body(dm("busy?", ts="51.1")))
        await slack.wait_for("chat.postMessage", 11, thread_ts="51.1", timeout=60)
        # The channel delivers this one once it has recorded the first as sent.
        await gw.post_event(event_body(dm("marker", ts="51.2", thread_ts="51.1")))
        await slack.wait_for("chat.postMessage", 12, thread_ts="51.1", timeout=60)
        report = await gw.status()
    assert slack.thread("51.1") == ["echo: busy?", "echo: marker"]
    assert gw.channel(report)["failed_deliveries"] == 0


async def test_a_schedule_made_in_a_thread_answers_in_that_thread(home: Path) -> None:
    async with (
        FakeSlack() as slack,
        FakeOpenAI() as llm,
        gateway(home, overrides(slack, llm)) as gw,
    ):
        await gw.running()
        await gw.post_event(event_body(mention("/after 10s say tick", ts="60.1")))
        [made] = await slack.wait_for("chat.postMessage", thread_ts="60.1")
        assert "10s" in made.args["text"] or "schedule" in made.args["text"].lower()
        posts = await slack.wait_for("chat.postMessage", 2, timeout=40, thread_ts="60.1")
    assert posts[1].args["text"] == "echo: say tick"
    assert [e["session"] for e in llm.log] == ["slack:T1:CGENERAL:60.1"]


async def test_allow_lists_refuse_politely_without_an_llm_call(home: Path) -> None:
    async with FakeSlack() as slack, FakeOpenAI() as llm:
        config = overrides(slack, llm, allow_users=["UBOSS"])
        async with gateway(home, config) as gw:
            await gw.running()
            body = event_body(dm("let me in", ts="70.1", user="UOTHER"))
            await gw.post_event(body)
            await gw.post_event(body, headers={"X-Slack-Retry-Num": "1"})
            [refusal] = await slack.wait_for("chat.postMessage", channel="DALICE")
            await gw.post_event(event_body(dm("hi", ts="71.1", user="UBOSS")))
            await slack.wait_for("chat.postMessage", 2, channel="DALICE")
    assert refusal.args["text"] == REFUSAL and "thread_ts" not in refusal.args
    assert [p.args["text"] for p in slack.posts(channel="DALICE")] == [REFUSAL, "echo: hi"]
    assert [e["session"] for e in llm.log] == ["slack:T1:DALICE"]  # only the boss's


async def test_text_files_are_given_to_the_agent(home: Path) -> None:
    async with (
        FakeSlack() as slack,
        FakeOpenAI() as llm,
        gateway(home, overrides(slack, llm)) as gw,
    ):
        await gw.running()
        slack.files["F1/notes.txt"] = b"the build is green"
        files = [
            {
                "id": "F1",
                "name": "notes.txt",
                "mimetype": "text/plain",
                "size": 18,
                "url_private_download": slack.file_url("F1/notes.txt"),
            },
            {
                "id": "F2",
                "name": "cat.png",
                "mimetype": "image/png",
                "size": 2048,
                "url_private_download": slack.file_url("F2/cat.png"),
            },
        ]
        event = dm("read this", ts="80.1", subtype="file_share", files=files)
        await gw.post_event(event_body(event))
        await slack.wait_for("chat.postMessage", channel="DALICE")
    [request] = llm.requests
    user = request["messages"][-1]["content"]
    assert "the build is green" in user and "notes.txt" in user
    assert "cat.png (image/png, 2.0 KiB); not a text file" in user


async def test_a_refused_token_leaves_the_gateway_up_and_says_why(home: Path) -> None:
    async with FakeSlack(bot_token="xoxb-the-real-one") as slack:
        config = overrides(slack, None)
        config["channels"]["slack"]["bot_token"] = "xoxb-revoked-0123456789"
        async with gateway(home, config) as gw:
            async with asyncio.timeout(30):
                while gw.channel(report := await gw.status())["state"] != "failed":
                    await asyncio.sleep(0.05)
            code, body = await gw.readyz()
            assert code == 503
            assert "channel slack failed: auth.test failed: invalid_auth" in body["reasons"]
            async with gw.control.post(
                "/v1/messages", json={"session": "cli:x", "text": "hi", "stream": False}
            ) as response:
                assert "echo: hi" in await response.text()
            # Fixed on Slack's side: the retry succeeds.
            slack.bot_token = "xoxb-revoked-0123456789"
            await gw.running()
    assert "xoxb-revoked" not in str(report)


async def test_a_missing_scope_is_named(home: Path) -> None:
    async with (
        FakeSlack(scopes="app_mentions:read,im:history") as slack,
        gateway(home, overrides(slack, None)) as gw,
        asyncio.timeout(30),
    ):
        while (c := gw.channel(await gw.status()))["state"] != "failed":
            await asyncio.sleep(0.05)
    assert "chat:write" in c["error"]


@pytest.mark.parametrize(("mode", "key"), [("socket", "app_token"), ("http", "signing_secret")])
async def test_missing_tokens_exit_78_naming_the_key(
    home: Path, mode: str, key: str, capfd: pytest.CaptureFixture[str]
) -> None:
    table = {"enabled": True, "mode": mode, "bot_token": "xoxb-1"}
    code = await serve(
        home,
        stop=asyncio.Event(),
        env={},
        config_overrides={"channels": {"slack": table}},
        entry_points=SLACK,
    )
    assert code == EX_CONFIG
    assert f"channels.slack.{key}" in capfd.readouterr().err


async def test_a_message_that_cannot_be_stored_is_refused_where_it_was_sent_and_acked() -> None:
    with small_disk(8) as disk:
        home = disk / "home"
        home.mkdir(mode=0o700)
        async with FakeSlack() as slack, gateway(home, overrides(slack, None)) as gw:
            await gw.running()
            filler = await asyncio.to_thread(fill, disk)

            async def full() -> bool:
                return (await gw.readyz())[0] == 503

            await eventually(full, timeout=15, what="the full disk noticed")
            status, _, _ = await gw.post_event(event_body(dm("full?", ts="80.1")))
            assert status == 200  # acked: Slack's retries would be refused alike
            # A top-level DM is answered in the DM itself (dm_reply_in_thread = false).
            [refusal] = await slack.wait_for("chat.postMessage", channel="DALICE")
            assert refusal.args["text"] == STORE_REFUSAL and "thread_ts" not in refusal.args
            filler.unlink()
            await eventually(lambda: _ready(gw), timeout=15, what="room again")
            await gw.post_event(event_body(dm("room?", ts="81.1")))
            _, reply = await slack.wait_for("chat.postMessage", 2, channel="DALICE")
            assert reply.args["text"] == "echo: room?"


async def _ready(gw: Gateway) -> bool:
    return (await gw.readyz())[0] == 200
