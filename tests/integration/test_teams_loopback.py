"""Anonymous mode with the local tools' service URLs: the Agents Playground and the Bot
Framework Emulator post ``http://localhost:<port>`` / ``http://127.0.0.1:<port>``.
The real gateway, the Agents SDK, the fake Teams connector on loopback."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.fakes.fake_openai import FakeOpenAI, Text
from tests.fakes.fake_teams import FakeTeams, message
from tests.integration.teams_rig import gateway, overrides


@pytest.fixture
def home(daemon_home: Path) -> Path:
    return daemon_home


@pytest.fixture(autouse=True)
def _restore_logging(restore_root_logging: None) -> None:
    """Tests here run the daemon in-process."""


def _anonymous(teams: FakeTeams, llm: FakeOpenAI, allow: list[str]) -> dict[str, Any]:
    config = overrides(
        teams, llm, anonymous=True, app_id="", app_password=None, service_url_allow=allow
    )
    config["http"] = {"port": 0, "host": "127.0.0.1"}
    return config


@pytest.mark.parametrize(
    ("allow", "host"),
    [(["127.0.0.1"], "127.0.0.1"), (["localhost"], "localhost"), (["localhost"], "127.0.0.1")],
)
async def test_a_loopback_entry_lets_the_local_tools_service_url_in(
    home: Path, allow: list[str], host: str
) -> None:
    async with FakeTeams() as teams, FakeOpenAI() as llm:
        url = f"http://{host}:{teams.port}/"
        async with gateway(home, teams, _anonymous(teams, llm, allow)) as gw:
            await gw.running()
            llm.script(Text("hello from the gateway"))
            status, _, body = await gw.post(
                message("hi", service_url=url, activity_id="7001"), token=None
            )
            assert status == 202, body
            [reply] = await teams.wait_for(conversation="a:1-alice-personal")
    assert reply.text == "hello from the gateway" and reply.reply_to == "7001"


async def test_a_loopback_entry_with_a_port_admits_that_port_only(home: Path) -> None:
    async with FakeTeams() as teams, FakeOpenAI() as llm:
        good = f"http://localhost:{teams.port}/"
        other = f"http://localhost:{teams.port + 1 if teams.port < 65535 else 1}/"
        config = _anonymous(teams, llm, [f"http://localhost:{teams.port}"])
        async with gateway(home, teams, config) as gw:
            await gw.running()
            refused, _, _ = await gw.post(
                message("hi", service_url=other, activity_id="7101"), token=None
            )
            outside, _, _ = await gw.post(
                message("hi", service_url="http://bots.example.org/", activity_id="7102"),
                token=None,
            )
            llm.script(Text("port ok"))
            status, _, body = await gw.post(
                message("hi", service_url=good, activity_id="7103"), token=None
            )
            assert status == 202, body
            [reply] = await teams.wait_for(conversation="a:1-alice-personal")
            report = await gw.status()
    assert refused == 401 and outside == 401
    assert reply.text == "port ok" and len(llm.log) == 1
    assert report["queue"] == {"pending": 0, "claimed": 0}
