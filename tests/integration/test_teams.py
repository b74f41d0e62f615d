"""The Teams channel in the real gateway: the Agents SDK against the fake Teams, on loopback."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from channels.teams import REFUSAL
from gateway.daemon import EX_CONFIG, serve
from tests.fakes.fake_openai import Delay, FakeOpenAI, Text
from tests.fakes.fake_teams import APP_ID, WRONG_SECRET, FakeTeams, message
from tests.integration.teams_rig import TEAMS, gateway, overrides


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
        status, _, _ = await (gw.post(activity, token=None) if header is None else gw.post(
            activity, auth=header
        ))
        assert status == 401
        await asyncio.sleep(1.0)
        report = await gw.status()
    assert llm.log == [] and teams.activities == []
    assert report["queue"] == {"pending": 0, "claimed": 0}
