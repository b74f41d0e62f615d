"""Approvals through real channels: Slack (fake Slack) and webhooks show the whole
command; a webhook hook answers approvals only with ``allow_approve``, and then as
``webhook:<hook>``, never as the ``sender`` its body names."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.fake_openai import FakeOpenAI
from tests.fakes.fake_slack import FakeSlack, event_body
from tests.integration.slack_rig import dm, gateway, overrides
from tests.integration.webhook_harness import running_webhook, write_webhook_config
from tests.waiting import eventually

DECODE = "echo ZWNobyBoaQ== | base64 -d | sh"
LONG = DECODE + "; echo " + "a" * 360 + "; echo tail-$((6*7))"
SECRET = "whsec-approvals-77c1"
_ID = re.compile(r"/approve ([a-z0-9]{6}) or")


@pytest.fixture
def home(daemon_home: Path) -> Path:
    return daemon_home


@pytest.fixture(autouse=True)
def _restore_logging(restore_root_logging: None) -> None:
    """Tests here run the daemon in-process."""


async def test_slack_notice_shows_every_character(home: Path) -> None:
    async with (
        FakeSlack() as slack,
        FakeOpenAI() as llm,
        gateway(home, overrides(slack, llm)) as gw,
    ):
        await gw.running()
        llm.script([("exec", {"command": LONG})])
        await gw.post_event(event_body(dm("clean up", ts="41.1")))

        def shown() -> str:  # a top-level DM is answered in the DM itself, not a thread
            posted = [m["text"] for m in slack.messages.values() if m.get("channel") == "DALICE"]
            return html.unescape("\n".join(posted))

        await eventually(lambda: "/deny" in shown(), what="the approval notice in Slack")
    assert LONG in shown()


def _configure(home: Path, fake: FakeOpenAI) -> None:
    provider = (
        f'[provider]\nkind = "openai"\nbase_url = "{fake.base_url}"\n'
        'model = "fake-model"\napi_key = "sk-x"\nmax_retries = 0\n'
    )
    hooks = (
        f'[channels.webhook.hooks.ci]\nsecret = "{SECRET}"\n\n'
        f'[channels.webhook.hooks.ops]\nsecret = "{SECRET}"\nallow_approve = true\n'
    )
    write_webhook_config(home, provider=provider, hooks=hooks)


def _run(command: str) -> str:
    return "!tool exec " + json.dumps({"command": command})


async def _events(gw: Any, key: str, kind: str) -> list[dict[str, Any]]:
    session = await gw.session(key)
    assert session is not None
    return [e for e in session["events"] if e["type"] == kind]


async def test_webhook_hook_with_allow_approve_sees_the_whole_command_and_answers_as_itself(
    home: Path,
) -> None:
    async with FakeOpenAI(latency=0.01) as fake:
        _configure(home, fake)
        async with running_webhook(home) as gw:
            asked = await gw.post(
                "ops", {"text": _run(LONG), "wait": True, "sender": "alice"}, secret=SECRET
            )
            assert asked.status == 200, asked
            reply = asked.body["reply"]
            assert LONG in reply
            match = _ID.search(reply)
            assert match is not None, reply
            aid = match.group(1)
            answer = {"text": f"/approve {aid}", "wait": True, "sender": "the-operator"}
            done = await gw.post("ops", answer, secret=SECRET)
            assert done.status == 200 and done.body["status"] == "done", done
            assert LONG in done.body["reply"] and "ran (exit 0)" in done.body["reply"]
            decided = await _events(gw, "webhook:ops:default", "tool.approval_decided")
    assert [e["data"]["decided_by"] for e in decided] == ["webhook:ops"]


async def test_webhook_hook_without_allow_approve_cannot_approve(home: Path) -> None:
    async with FakeOpenAI(latency=0.01) as fake:
        _configure(home, fake)
        async with running_webhook(home) as gw:
            asked = await gw.post("ci", {"text": _run(DECODE), "wait": True}, secret=SECRET)
            assert asked.status == 200, asked
            assert "command refused" in asked.body["reply"]
            assert "/approve" not in asked.body["reply"]
            tried = await gw.post("ci", {"text": "/approve abcdef", "wait": True}, secret=SECRET)
            requested = await _events(gw, "webhook:ci:default", "tool.approval_requested")
    assert tried.status == 200 and tried.body["status"] == "failed", tried
    assert tried.body["reply"].startswith("/approve is not allowed from here")
    assert requested == []
