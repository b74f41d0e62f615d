"""The Teams channel in the real gateway: the Agents SDK against the fake Teams, on loopback."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from channels.teams import REFUSAL
from channels.teams.channel import STORE_REFUSAL
from gateway.daemon import EX_CONFIG, serve
from tests.fakes.fake_openai import Delay, FakeOpenAI, Text
from tests.fakes.fake_teams import APP_ID, WRONG_SECRET, FakeTeams, message
from tests.integration.teams_rig import TEAMS, gateway, overrides
from tests.small_disk import fill, small_disk
from tests.stored import inbound_count
from tests.waiting import eventually


@pytest.fixture
def home(daemon_home: Path) -> Path:
    return daemon_home


@pytest.fixture(autouse=True)
def _restore_logging(restore_root_logging: None) -> None:
    """Tests here run the daemon in-process."""


async def test_a_chat_a_group_and_a_channel_mention_are_answered_in_place(home: Path) -> None:
    async with (
        FakeTeams() as teams,
        FakeOpenAI() as llm,
        gateway(home, teams, overrides(teams, llm)) as gw,
    ):
        await gw.running()
        url = teams.service_url
        llm.script(Text("Hi **Alice**"))
        one = message("hello", service_url=url, activity_id="1001")
        status, _, _ = await gw.post(one)
        assert status == 202
        [reply] = await teams.wait_for(conversation="a:1-alice-personal")
        assert reply.text == "Hi **Alice**" and reply.reply_to == "1001"
        assert reply.body["replyToId"] == "1001" and reply.token

        group = message("status?", service_url=url, kind="groupChat", activity_id="2001")
        assert (await gw.post(group))[0] == 202
        [reply] = await teams.wait_for(conversation="19:group-chat@thread.v2")
        assert reply.text == "echo: status?"  # the @-mention was stripped

        post = message("deploy", service_url=url, kind="channel", activity_id="3001")
        assert (await gw.post(post))[0] == 202
        thread = "19:general@thread.tacv2;messageid=3001"
        [reply] = await teams.wait_for(conversation=thread)
        assert reply.text == "echo: deploy"
        # A reply in that thread continues the thread's session.
        again = message(
            "and again", service_url=url, kind="channel", conversation=thread, activity_id="3002"
        )
        await gw.post(again)
        await teams.wait_for(count=2, conversation=thread)
        sessions = [entry["session"] for entry in llm.log]
    assert sessions == [
        "teams:a:1-alice-personal",
        "teams:19:group-chat@thread.v2",
        "teams:19:general@thread.tacv2:3001",
        "teams:19:general@thread.tacv2:3001",
    ]


@pytest.mark.parametrize(
    "auth",
    [None, "Bearer not-a-jwt", "wrong-audience", "expired", "unknown-key", "Basic abc"],
)
async def test_a_bad_or_missing_token_gets_401_and_nothing_is_queued(
    home: Path, auth: str | None
) -> None:
    async with (
        FakeTeams() as teams,
        FakeOpenAI() as llm,
        gateway(home, teams, overrides(teams, llm)) as gw,
    ):
        await gw.running()
        forged = {
            "wrong-audience": teams.token(audience="someone-else"),
            "expired": teams.token(expired=True),
            "unknown-key": teams.token(kid="not-ours"),
        }
        header = f"Bearer {forged[auth]}" if auth in forged else auth
        activity = message("let me in", service_url=teams.service_url)
        status, _, _ = await (
            gw.post(activity, token=None) if header is None else gw.post(activity, auth=header)
        )
        assert status == 401
        # A message is stored before it is answered: none was, so none will run.
        assert inbound_count(home) == 0
        report = await gw.status()
    assert llm.log == [] and teams.activities == []
    assert report["queue"] == {"pending": 0, "claimed": 0}


async def test_a_redelivered_activity_is_answered_once_and_typing_is_shown(home: Path) -> None:
    async with (
        FakeTeams() as teams,
        FakeOpenAI() as llm,
        gateway(home, teams, overrides(teams, llm, typing_interval=0.5)) as gw,
    ):
        await gw.running()
        activity = message("once please !sleep 3", service_url=teams.service_url)
        first = await gw.post(activity)
        again = await gw.post(activity)  # Teams redelivers when an answer was slow
        assert first[0] == again[0] == 202
        assert inbound_count(home) == 1  # stored before the 202: the redelivery was dropped
        conversation = "a:1-alice-personal"
        [reply] = await teams.wait_for(conversation=conversation)
        typing = teams.of("typing", conversation=conversation)
        # Bob's slow turn shows typing after 1 s, then every 0.5 s: by its second one,
        # alice's indicator (same timers) would have sent again, were it still running.
        bob = message("me too !sleep 2", service_url=teams.service_url, user="bob")
        await gw.post(bob)
        await teams.wait_for("typing", 2, conversation="a:1-bob-personal")
        after = teams.of("typing", conversation=conversation)
    assert reply.text == "echo: once please !sleep 3"
    assert len(teams.of(conversation=conversation)) == 1
    assert [e["user_text"] for e in llm.log] == ["once please !sleep 3", "me too !sleep 2"]
    assert len(typing) >= 2  # refreshed while the 3 s turn ran
    assert all(t.at < reply.at for t in typing) and len(after) == len(typing)  # then stopped


async def test_allow_lists_refuse_politely_without_an_llm_call(home: Path) -> None:
    async with FakeTeams() as teams, FakeOpenAI() as llm:
        config = overrides(teams, llm, allow_users=["aad-boss"])
        async with gateway(home, teams, config) as gw:
            await gw.running()
            url = teams.service_url
            stranger = message("let me in", service_url=url, user="mallory")
            await gw.post(stranger)
            await gw.post(stranger)
            [refusal] = await teams.wait_for(conversation="a:1-mallory-personal")
            await gw.post(message("hi", service_url=url, user="boss"))
            await teams.wait_for(conversation="a:1-boss-personal")
            other_tenant = overrides(teams, llm, allow_tenants=["another-tenant"])
        async with gateway(home, teams, other_tenant) as gw:
            await gw.running()
            await gw.post(message("from afar", service_url=url, user="boss", activity_id="9"))
            await teams.wait_for(count=2, conversation="a:1-boss-personal")
    assert refusal.text == REFUSAL
    assert len(teams.of(conversation="a:1-mallory-personal")) == 1
    assert teams.of(conversation="a:1-boss-personal")[1].text == REFUSAL
    assert [e["session"] for e in llm.log] == ["teams:a:1-boss-personal"]  # only the boss's


@pytest.mark.slow
async def test_a_schedule_made_in_teams_fires_there_after_a_restart(home: Path) -> None:
    async with FakeTeams() as teams, FakeOpenAI() as llm:
        url = teams.service_url
        thread = "19:general@thread.tacv2;messageid=4001"
        async with gateway(home, teams, overrides(teams, llm)) as gw:
            await gw.running()
            made = message(
                "/after 10s say tick", service_url=url, kind="channel", activity_id="4001"
            )
            await gw.post(made)
            [confirmation] = await teams.wait_for(conversation=thread)
        assert "schedule" in confirmation.text.lower() or "10s" in confirmation.text
        assert llm.log == []
        # A new gateway (nothing in memory): the firing finds the thread by its reference.
        async with gateway(home, teams, overrides(teams, llm)) as gw:
            await gw.running()
            posts = await teams.wait_for(count=2, conversation=thread, timeout=60)
    assert posts[1].text == "echo: say tick" and posts[1].reply_to == "4001"
    assert [e["session"] for e in llm.log] == ["teams:19:general@thread.tacv2:4001"]


async def test_anonymous_mode_is_refused_off_loopback(home: Path) -> None:
    async with FakeTeams() as teams, FakeOpenAI() as llm:
        config = overrides(teams, llm, anonymous=True, app_id="", app_password=None)
        config["http"] = {"port": 0, "host": "0.0.0.0"}
        async with gateway(home, teams, config) as gw:
            channel = await gw.state("failed")
            code, body = await gw.readyz()
            status, _, _ = await gw.post(message("hi", service_url=teams.service_url), token=None)
            report = await gw.status()
    assert "anonymous mode is refused" in channel["error"]
    assert code == 503 and any("anonymous" in r for r in body["reasons"])
    assert status in (401, 503) and llm.log == [] and teams.activities == []
    assert report["queue"] == {"pending": 0, "claimed": 0}


async def test_anonymous_mode_refuses_forwarded_requests(home: Path) -> None:
    """A loopback ``http.host`` behind a dev tunnel or a local reverse proxy is public:
    anonymous mode answers only requests that were not forwarded."""
    async with FakeTeams() as teams, FakeOpenAI() as llm:
        config = overrides(teams, llm, anonymous=True, app_id="", app_password=None)
        config["http"] = {"port": 0, "host": "127.0.0.1"}
        async with gateway(home, teams, config) as gw:
            await gw.running()
            for header in ("X-Forwarded-For", "Forwarded"):
                status, _, body = await gw.post(
                    message("hi", service_url=teams.service_url, activity_id=header),
                    token=None,
                    headers={header: "for=203.0.113.9"},
                )
                assert status == 403 and "local requests only" in body, (status, body)
            report = await gw.status()
            assert report["queue"] == {"pending": 0, "claimed": 0}
            local = message("hi", service_url=teams.service_url, activity_id="5001")
            assert (await gw.post(local, token=None))[0] == 202
            await teams.wait_for(conversation="a:1-alice-personal")
    assert len(llm.log) == 1


async def test_a_refused_secret_leaves_the_gateway_up_and_says_which_setting(home: Path) -> None:
    async with (
        FakeTeams() as teams,
        gateway(home, teams, overrides(teams, None, app_password=WRONG_SECRET)) as gw,
    ):
        channel = await gw.state("failed")
        code, body = await gw.readyz()
        async with gw.control.post(
            "/v1/messages", json={"session": "cli:x", "text": "hi", "stream": False}
        ) as response:
            assert "echo: hi" in await response.text()
    assert "channels.teams.app_password is wrong" in channel["error"]
    assert WRONG_SECRET not in str(channel)
    assert code == 503 and any("channel teams failed" in r for r in body["reasons"])


async def test_missing_credentials_exit_78_naming_the_key(
    home: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    code = await serve(
        home,
        stop=asyncio.Event(),
        env={},
        config_overrides={"channels": {"teams": {"enabled": True, "app_id": APP_ID}}},
        entry_points=TEAMS,
    )
    assert code == EX_CONFIG
    assert "channels.teams.app_password" in capfd.readouterr().err


async def test_a_long_turn_is_acknowledged_before_it_is_answered(home: Path) -> None:
    async with (
        FakeTeams() as teams,
        FakeOpenAI() as llm,
        gateway(home, teams, overrides(teams, llm)) as gw,
    ):
        await gw.running()
        llm.script(Delay(5.0, Text("slow answer")))
        status, _, _ = await gw.post(message("think hard", service_url=teams.service_url))
        assert status == 202
        assert teams.of() == []  # acknowledged while the turn still runs
        [reply] = await teams.wait_for()
    assert reply.text == "slow answer"


async def test_errors_are_one_line_and_a_refused_send_is_retried(home: Path) -> None:
    async with (
        FakeTeams() as teams,
        FakeOpenAI() as llm,
        gateway(home, teams, overrides(teams, llm)) as gw,
    ):
        await gw.running()
        teams.fail_next = 1  # the connector answers 503 once: the outbox retries
        await gw.post(message("fine", service_url=teams.service_url, user="ann"))
        [reply] = await teams.wait_for(conversation="a:1-ann-personal")
        await gw.post(message("break !fail 400", service_url=teams.service_url, user="bob"))
        [error] = await teams.wait_for(conversation="a:1-bob-personal")
    assert reply.text == "echo: fine" and teams.fail_next == 0
    assert error.text.startswith("⚠️ ") and "\n" not in error.text


async def test_a_streamed_reply_shows_in_a_chat_and_the_final_text_replaces_it(
    home: Path,
) -> None:
    async with (
        FakeTeams() as teams,
        FakeOpenAI() as llm,
        gateway(home, teams, overrides(teams, llm)) as gw,
    ):
        await gw.running()
        answer = "word " * 60
        llm.script(Text(answer, chunk_chars=5, chunk_delay=0.05))  # ~3 s of streaming
        await gw.post(message("write a lot", service_url=teams.service_url))
        conversation = "a:1-alice-personal"
        [shown] = await teams.wait_for(conversation=conversation)
        async with asyncio.timeout(30):
            while not any(e.text == answer.strip() for e in teams.edits):
                await asyncio.sleep(0.05)
        # In a group chat the final text comes as one message, nothing is edited.
        edits = len(teams.edits)
        llm.script(Text(answer, chunk_chars=5, chunk_delay=0.05))
        await gw.post(message("write a lot", service_url=teams.service_url, kind="groupChat"))
        [group] = await teams.wait_for(conversation="19:group-chat@thread.v2")
    assert len(teams.of(conversation=conversation)) == 1  # the streamed message became the reply
    assert shown.text != answer.strip() and answer.startswith(shown.text)
    assert {e.edit_of for e in teams.edits} == {shown.id}
    assert teams.edits[-1].text == answer.strip() and edits >= 2  # streamed, then final
    assert group.text == answer.strip() and len(teams.edits) == edits


async def test_a_service_url_off_microsofts_hosts_is_refused_by_default(home: Path) -> None:
    async with FakeTeams() as teams, FakeOpenAI() as llm:
        config = overrides(teams, llm, service_url_allow=[])  # the default
        async with gateway(home, teams, config) as gw:
            await gw.running()
            status, _, _ = await gw.post(message("hi", service_url=teams.service_url))
            assert inbound_count(home) == 0  # (stored before it is answered)
            report = await gw.status()
    assert status == 401 and llm.log == [] and teams.activities == []
    assert report["queue"] == {"pending": 0, "claimed": 0}


async def test_a_message_that_cannot_be_stored_is_refused_in_its_conversation() -> None:
    with small_disk(8) as disk:
        home = disk / "home"
        home.mkdir(mode=0o700)
        async with FakeTeams() as teams, gateway(home, teams, overrides(teams, None)) as gw:
            await gw.running()
            filler = await asyncio.to_thread(fill, disk)

            async def full() -> bool:
                return (await gw.readyz())[0] == 503

            await eventually(full, timeout=15, what="the full disk noticed")
            url = teams.service_url
            status, _, _ = await gw.post(message("full?", service_url=url, activity_id="81"))
            assert status < 300, status
            [refusal] = await teams.wait_for(conversation="a:1-alice-personal")
            assert refusal.text == STORE_REFUSAL
            filler.unlink()

            async def ready() -> bool:
                return (await gw.readyz())[0] == 200

            await eventually(ready, timeout=15, what="room again")
            await gw.post(message("room?", service_url=url, activity_id="82"))
            replies = await teams.wait_for(count=2, conversation="a:1-alice-personal")
            assert replies[1].text == "echo: room?"
