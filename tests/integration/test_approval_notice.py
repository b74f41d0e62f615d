"""What an approval shows and binds: the whole command verbatim in the notice (core/CLI,
Slack and webhook), a SHA-256 digest that /approve checks before anything runs.

The long command is harmless: it decodes ``echo hi`` into a shell (which asks), then
echoes 360 letters and a hidden tail, ``tail-42``, whose output proves the tail ran.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from sqlalchemy import update

from channels.slack.render import split, to_mrkdwn
from core.providers.base import ChatRequest, Completion, ToolCall
from core.providers.scripted import FunctionProvider, Reply
from core.store.models import ApprovalRow
from core.tools.approvals import outcome_message_id
from core.tools.approvals.records import command_digest
from tests.integration.harness import inbound, running_core

DECODE = "echo ZWNobyBoaQ== | base64 -d | sh"
LONG = DECODE + "; echo " + "a" * 360 + "; echo tail-$((6*7))"
_ID = re.compile(r"Approval #([a-z0-9]{6}) is pending")


def script(request: ChatRequest) -> Reply:
    last = request.messages[-1]
    if last.role == "tool":
        return f"tool said: {last.content}"
    if last.content.startswith("run "):
        call = ToolCall(id="c1", name="exec", arguments={"command": last.content[4:]})
        return Completion(tool_calls=(call,))
    return f"model saw: {last.content}"


def approval_id(text: str) -> str:
    match = _ID.search(text)
    assert match is not None, text
    return match.group(1)


async def test_a_long_command_is_shown_whole_and_its_tail_is_what_runs(
    store_url: str, tmp_path: Path
) -> None:
    assert len(LONG) >= 400
    async with running_core(
        store_url=store_url, workspace=tmp_path / "ws", provider=FunctionProvider(script)
    ) as (app, replies):
        ask = inbound("cli:a", f"run {LONG}")
        await app.bus.publish_inbound(ask)
        (asked,) = await replies.wait([ask.id])
        aid = approval_id(asked.text)
        info = await app.approvals.get(aid)
        assert info is not None and info.command_sha256 == command_digest(LONG, info.timeout)
        # The notice: every character, in a fenced block, with its length and digest.
        assert f"```\n{LONG}\n```" in asked.text
        assert f"({len(LONG)} characters, sha256 {info.command_sha256[:16]})" in asked.text
        assert "..." not in asked.text

        answer = inbound("cli:a", f"/approve {aid}")
        await app.bus.publish_inbound(answer)
        (confirmed, outcome) = await replies.wait([answer.id, outcome_message_id(aid)])
    assert confirmed.text.startswith(f"Approved #{aid}: \n({len(LONG)} characters")
    assert f"```\n{LONG}\n```" in confirmed.text and confirmed.text.endswith("ran (exit 0).")
    assert "tail-42" in outcome.text  # what the notice showed is what ran, tail included


async def test_a_command_that_no_longer_matches_its_digest_is_refused(
    store_url: str, tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    async with running_core(
        store_url=store_url, workspace=ws, provider=FunctionProvider(script)
    ) as (app, replies):
        ask = inbound("cli:a", f"run {DECODE}")
        await app.bus.publish_inbound(ask)
        (asked,) = await replies.wait([ask.id])
        aid = approval_id(asked.text)
        swapped = update(ApprovalRow).where(ApprovalRow.id == aid).values(command="touch pwned")  # type: ignore[arg-type]
        await app.store.transact(lambda conn: conn.execute(swapped))

        answer = inbound("cli:a", f"/approve {aid}")
        await app.bus.publish_inbound(answer)
        (refused, outcome) = await replies.wait([answer.id, outcome_message_id(aid)])
        info = await app.approvals.get(aid)
    assert refused.kind == "error"
    assert refused.text == (
        f"approval #{aid} refused: the command to run does not match the one you were "
        "shown (its SHA-256 differs); nothing ran"
    )
    assert "no longer matched the one shown for approval" in outcome.text
    assert info is not None and info.status == "denied"
    assert not (ws / "pwned").exists()


async def test_invisible_characters_are_shown_escaped(store_url: str, tmp_path: Path) -> None:
    hidden = DECODE + " # \u202e\r" + "echo looks-harmless"
    async with running_core(
        store_url=store_url, workspace=tmp_path / "ws", provider=FunctionProvider(script)
    ) as (app, replies):
        ask = inbound("cli:a", f"run {hidden}")
        await app.bus.publish_inbound(ask)
        (asked,) = await replies.wait([ask.id])
    assert "shown escaped, as a JSON string" in asked.text
    assert json.dumps(hidden) in asked.text and "\u202e" not in asked.text


async def test_a_message_without_an_authenticated_approver_cannot_answer(
    store_url: str, tmp_path: Path
) -> None:
    async with running_core(
        store_url=store_url, workspace=tmp_path / "ws", provider=FunctionProvider(script)
    ) as (app, replies):
        ask = inbound("cli:a", f"run {DECODE}")
        await app.bus.publish_inbound(ask)
        (asked,) = await replies.wait([ask.id])
        aid = approval_id(asked.text)
        forged = inbound("cli:a", f"/approve {aid}", approver=None, sender="the-operator")
        await app.bus.publish_inbound(forged)
        (refused,) = await replies.wait([forged.id])
        answer = inbound("cli:a", f"/deny {aid}", sender="mallory")
        await app.bus.publish_inbound(answer)
        await replies.wait([answer.id])
        info = await app.approvals.get(aid)
    assert refused.kind == "error" and refused.text.startswith("/approve is not allowed from here")
    assert info is not None and info.decided_by == "test-user"  # never the typed sender


def test_slack_shows_every_character_of_a_huge_command() -> None:
    """Slack takes ~4,000 characters per message: a 20,000-character command is split
    over several messages, each a fenced block, with nothing dropped."""
    command = " ".join(f"echo part-{i:05d};" for i in range(1300))
    text = f"Waiting:\n```\n{command}\n```"
    parts = split(to_mrkdwn(text))
    assert len(parts) > 1 and all(len(p) <= 3500 for p in parts)
    fenced = [p for p in parts if "```" in p]
    bodies = [p.split("```\n", 1)[1].rsplit("\n```", 1)[0] for p in fenced]
    assert "".join(b.replace("\n", "") for b in bodies).replace(" ", "") == command.replace(" ", "")
