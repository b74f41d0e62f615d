"""An orchestration command typed in Slack: the real gateway, bolt against the fake
Slack, the scripted model on the fake OpenAI server."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from channels.slack.intake import command_text
from tests.fakes.fake_openai import FakeOpenAI, ScriptItem
from tests.fakes.fake_slack import FakeSlack, event_body
from tests.integration.slack_rig import gateway, mention, overrides
from tests.integration.subagent_rig import last_text, last_user
from tests.waiting import eventually


def test_the_familiar_slash_command_maps_the_orchestration_commands() -> None:
    assert command_text("research tides and currents") == "/research tides and currents"
    assert command_text("subconscious run") == "/subconscious run"
    assert command_text("fleet ship it") == "/fleet ship it"
    assert command_text("review") == "/review"
    assert command_text("autopilot on") == "/autopilot on"
    assert command_text("reviewing my plan?") == "reviewing my plan?"


FINDING = "billing.py:12: the refund is applied twice when the retry succeeds"


@pytest.fixture
def home(daemon_home: Path) -> Path:
    return daemon_home


@pytest.fixture(autouse=True)
def _restore_logging(restore_root_logging: None) -> None:
    """Tests here run the daemon in-process."""


def _respond(session: str | None, messages: list[dict[str, Any]]) -> ScriptItem:
    if session and session.startswith("subagent:"):
        return f"Finding: {FINDING}"
    if (result := last_text(messages)) is not None:
        return "Review of billing.py:\n" + json.loads(result)["result"]
    asked = re.search(r'agent_type "([a-z-]+)"', last_user(messages))
    target = re.search(r"to review: (.+?)\.\n", last_user(messages))
    assert asked is not None and target is not None
    return [("sessions_spawn", {"agent_type": asked.group(1), "prompt": target.group(1)})]


async def test_review_from_a_slack_thread_answers_with_the_findings(home: Path) -> None:
    async with (
        FakeSlack() as slack,
        FakeOpenAI(responder=_respond) as llm,
        gateway(home, overrides(slack, llm)) as gw,
    ):
        await gw.running()
        status, _, _ = await gw.post_event(event_body(mention("/review billing.py", ts="500.1")))
        assert status == 200
        await eventually(
            lambda: any(FINDING in text for text in slack.thread("500.1")),
            what="the review's findings in the thread",
        )
        thread = slack.thread("500.1")
        sessions = [entry["session"] for entry in llm.log]
    # One reply in the thread (the progress placeholder became it), with the findings.
    assert len(thread) == 1 and thread[0].startswith("Review of billing.py:")
    key = "slack:T1:CGENERAL:500.1"
    assert sessions[0] == key and sessions[-1] == key
    assert sessions[1].startswith("subagent:") and len(sessions) == 3
