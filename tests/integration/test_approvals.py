"""Exec approvals end to end: the real agent loop, a real store, /approve and /deny.

The provider is scripted: ``run <command>`` makes it call ``exec`` with that command, a
tool result is echoed back as ``tool said: ...``, and any other message as ``model saw: ...``.
No test ever approves a destructive command: the ``rm`` one is only ever denied, and
is ``rm -rf "/" --help`` besides (GNU rm prints its help; it also keeps / by default).
"""

from __future__ import annotations

import asyncio
import re
import time
from pathlib import Path

from sqlmodel import col, select

from core.app import CoreApp
from core.event_data import ApprovalDecided, ApprovalRequested
from core.events import EventType
from core.providers.base import ChatRequest, Completion, ToolCall
from core.providers.scripted import FunctionProvider, Reply
from core.store.models import ApprovalRow
from core.tools import ExecConfig, ToolsConfig
from core.tools.approvals import outcome_message_id
from tests.integration.harness import inbound, running_core
from tests.waiting import eventually

DECODE = "echo ZWNobyBoaQ== | base64 -d | sh"
"""Matches "pipes into a shell"; runs ``echo hi``."""
RM = 'rm -rf "/" --help'
"""Matches "deletes /"; never approved (and harmless if it were)."""
_ID = re.compile(r"Approval #([a-z0-9]{6}) is pending")


def script(request: ChatRequest) -> Reply:
    last = request.messages[-1]
    if last.role == "tool":
        return f"tool said: {last.content}"
    if last.content.startswith("run "):
        call = ToolCall(id="c1", name="exec", arguments={"command": last.content[4:]})
        return Completion(tool_calls=(call,))
    return f"model saw: {last.content}"


def approval_id(reply_text: str) -> str:
    match = _ID.search(reply_text)
    assert match is not None, reply_text
    return match.group(1)


async def test_approved_command_runs_and_the_model_sees_the_outcome(
    store_url: str, tmp_path: Path
) -> None:
    async with running_core(
        store_url=store_url, workspace=tmp_path / "ws", provider=FunctionProvider(script)
    ) as (app, replies):
        ask = inbound("cli:a", f"run {DECODE}")
        await app.bus.publish_inbound(ask)
        (asked,) = await replies.wait([ask.id])
        assert "needs the user's approval (it pipes text into a shell" in asked.text
        aid = approval_id(asked.text)
        assert f"/approve {aid} or /deny {aid}" in asked.text
        info = await app.approvals.get(aid)
        assert info is not None and info.status == "pending" and info.command == DECODE

        answer = inbound("cli:a", f"/approve #{aid.upper()}")
        await app.bus.publish_inbound(answer)
        (confirmed,) = await replies.wait([answer.id])
        assert confirmed.kind == "reply"
        assert confirmed.text == f"Approved #{aid}: `{DECODE}` ran (exit 0)."
        (outcome,) = await replies.wait([outcome_message_id(aid)])
        assert outcome.text == (
            f"model saw: The user approved #{aid}; `{DECODE}` ran: exit 0, output:\nhi"
        )
        assert outcome.delivery == ask.delivery

        again = inbound("cli:a", f"/approve {aid}")
        await app.bus.publish_inbound(again)
        (twice,) = await replies.wait([again.id])
        events = await app.events.list("cli:a")
    assert (twice.kind, twice.text) == ("error", f"approval #{aid} was already approved")
    data = [e.data for e in events]
    requested = [d for d in data if isinstance(d, ApprovalRequested)]
    decided = [d for d in data if isinstance(d, ApprovalDecided)]
    assert [(r.approval_id, r.command) for r in requested] == [(aid, DECODE)]
    assert [(d.approval_id, d.decision) for d in decided] == [(aid, "approved")]
    assert requested[0].reason.startswith("pipes text into a shell")


async def test_denied_command_does_not_run(store_url: str, tmp_path: Path) -> None:
    async with running_core(
        store_url=store_url, workspace=tmp_path / "ws", provider=FunctionProvider(script)
    ) as (app, replies):
        ask = inbound("cli:a", f"run {RM}")
        await app.bus.publish_inbound(ask)
        (asked,) = await replies.wait([ask.id])
        assert "(it deletes /, the home directory or a system directory)" in asked.text
        aid = approval_id(asked.text)

        answer = inbound("cli:a", f"/deny {aid}")
        await app.bus.publish_inbound(answer)
        (confirmed, outcome) = await replies.wait([answer.id, outcome_message_id(aid)])
        info = await app.approvals.get(aid)
        events = await app.events.list("cli:a")
    assert confirmed.text == f"Denied #{aid}: `{RM}` will not run."
    assert outcome.text == f"model saw: The user denied #{aid}; `{RM}` was not run."
    assert info is not None and info.status == "denied" and info.decided_by is not None
    decided = [e.data for e in events if e.type == EventType.APPROVAL_DECIDED]
    assert [d.decision for d in decided if isinstance(d, ApprovalDecided)] == ["denied"]
    # exec never ran: no tool result carries an exit code
    completes = [e for e in events if e.type == EventType.TOOL_COMPLETE]
    assert completes and all("exit code" not in str(e.data) for e in completes)


async def _ask_then_stop(store_url: str, ws: Path, command: str) -> str:
    """Ask to run ``command``, then stop the core with the approval pending: its id."""
    async with running_core(
        store_url=store_url, workspace=ws, provider=FunctionProvider(script)
    ) as (app, replies):
        ask = inbound("cli:a", f"run {command}")
        await app.bus.publish_inbound(ask)
        (asked,) = await replies.wait([ask.id])
        return approval_id(asked.text)


async def test_pending_approval_survives_a_restart(store_url: str, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    aid = await _ask_then_stop(store_url, ws, DECODE)

    async with running_core(
        store_url=store_url, workspace=ws, provider=FunctionProvider(script)
    ) as (app, replies):
        info = await app.approvals.get(aid)
        assert info is not None and info.status == "pending"
        answer = inbound("cli:a", f"/approve {aid}")
        await app.bus.publish_inbound(answer)
        (confirmed, outcome) = await replies.wait([answer.id, outcome_message_id(aid)])
    assert confirmed.text.endswith("ran (exit 0).")
    assert outcome.text.startswith(f"model saw: The user approved #{aid}; `{DECODE}` ran: exit 0")
    assert outcome.text.endswith("output:\nhi")


async def test_pending_approval_denied_after_a_restart_never_runs(
    store_url: str, tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    aid = await _ask_then_stop(store_url, ws, RM)

    async with running_core(
        store_url=store_url, workspace=ws, provider=FunctionProvider(script)
    ) as (app, replies):
        info = await app.approvals.get(aid)
        assert info is not None and info.status == "pending" and info.command == RM
        answer = inbound("cli:a", f"/deny {aid}")
        await app.bus.publish_inbound(answer)
        (confirmed, outcome) = await replies.wait([answer.id, outcome_message_id(aid)])
        events = await app.events.list("cli:a")
    assert confirmed.text == f"Denied #{aid}: `{RM}` will not run."
    assert outcome.text == f"model saw: The user denied #{aid}; `{RM}` was not run."
    completes = [e for e in events if e.type == EventType.TOOL_COMPLETE]
    assert completes and all("exit code" not in str(e.data) for e in completes)


async def _past_expiry(app: CoreApp, aid: str) -> None:
    """Return once the clock the approvals read has passed ``aid``'s recorded expiry."""
    info = await app.approvals.get(aid)
    assert info is not None
    await eventually(lambda: time.time() > info.expires_at, timeout=10, what="expiry")


async def test_unanswered_approval_expires_and_is_denied(store_url: str, tmp_path: Path) -> None:
    tools = ToolsConfig(exec=ExecConfig(approval_timeout=0.3))
    async with running_core(
        store_url=store_url,
        workspace=tmp_path / "ws",
        provider=FunctionProvider(script),
        tools=tools,
    ) as (app, replies):
        ask = inbound("cli:a", f"run {DECODE}")
        await app.bus.publish_inbound(ask)
        (asked,) = await replies.wait([ask.id])
        aid = approval_id(asked.text)
        await _past_expiry(app, aid)
        assert await app.approvals.sweep() == 1
        (outcome,) = await replies.wait([outcome_message_id(aid)])
        late = inbound("cli:a", f"/approve {aid}")
        await app.bus.publish_inbound(late)
        (refused,) = await replies.wait([late.id])
        info = await app.approvals.get(aid)
        events = await app.events.list("cli:a")
    assert outcome.text == (
        f"model saw: Approval #{aid} for `{DECODE}` expired unanswered; it was not run."
    )
    assert (refused.kind, refused.text) == (
        "error",
        f"approval #{aid} expired unanswered; `{DECODE}` was not run",
    )
    assert info is not None and info.status == "expired"
    decided = [e.data for e in events if isinstance(e.data, ApprovalDecided)]
    assert [d.decision for d in decided] == ["expired"]


async def test_answer_after_expiry_but_before_the_sweep_is_refused(
    store_url: str, tmp_path: Path
) -> None:
    tools = ToolsConfig(exec=ExecConfig(approval_timeout=0.3))
    async with running_core(
        store_url=store_url,
        workspace=tmp_path / "ws",
        provider=FunctionProvider(script),
        tools=tools,
    ) as (app, replies):
        ask = inbound("cli:a", f"run {RM}")
        await app.bus.publish_inbound(ask)
        (asked,) = await replies.wait([ask.id])
        aid = approval_id(asked.text)
        await _past_expiry(app, aid)
        late = inbound("cli:a", f"/approve {aid}")
        await app.bus.publish_inbound(late)
        (refused, outcome) = await replies.wait([late.id, outcome_message_id(aid)])
        assert await app.approvals.sweep() == 0  # already expired and reported
    assert refused.kind == "error" and "expired unanswered" in refused.text
    assert "expired unanswered; it was not run." in outcome.text


async def test_another_session_cannot_answer(store_url: str, tmp_path: Path) -> None:
    async with running_core(
        store_url=store_url, workspace=tmp_path / "ws", provider=FunctionProvider(script)
    ) as (app, replies):
        ask = inbound("cli:a", f"run {RM}")
        await app.bus.publish_inbound(ask)
        (asked,) = await replies.wait([ask.id])
        aid = approval_id(asked.text)
        answers = [inbound("cli:b", f"/approve {aid}"), inbound("cli:b", f"/deny {aid}")]
        for answer in answers:
            await app.bus.publish_inbound(answer)
        out = await replies.wait([a.id for a in answers])
        info = await app.approvals.get(aid)
        unknown = inbound("cli:a", "/approve zzzzzz")
        await app.bus.publish_inbound(unknown)
        (nothing,) = await replies.wait([unknown.id])
    expected = f"no pending approval #{aid} in this conversation"
    assert [(o.kind, o.text) for o in out] == [("error", expected)] * 2
    assert info is not None and info.status == "pending"
    assert nothing.text == "no pending approval #zzzzzz in this conversation"


async def test_redelivered_turn_does_not_duplicate_the_approval(
    store_url: str, tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    tool_result_seen = asyncio.Event()

    async def stalls_after_the_tool(request: ChatRequest) -> Reply:
        if request.messages[-1].role == "tool":
            tool_result_seen.set()
            await asyncio.Event().wait()  # the process "dies" here (stopped below)
        return script(request)

    ask = inbound("cli:a", f"run {DECODE}")
    async with running_core(
        store_url=store_url, workspace=ws, provider=FunctionProvider(stalls_after_the_tool)
    ) as (app, _replies):
        await app.bus.publish_inbound(ask)
        await asyncio.wait_for(tool_result_seen.wait(), 30)
    async with running_core(
        store_url=store_url, workspace=ws, provider=FunctionProvider(script)
    ) as (app, replies):
        (asked,) = await replies.wait([ask.id])
        aid = approval_id(asked.text)
        async with app.store.read() as conn:
            query = select(ApprovalRow.id).where(col(ApprovalRow.message_id) == ask.id)
            ids = (await conn.execute(query)).scalars().all()
        events = await app.events.list("cli:a")
    assert list(ids) == [aid]
    assert [e.type for e in events].count(EventType.APPROVAL_REQUESTED) == 1


async def test_the_reply_itself_shows_the_pending_command_whatever_the_model_says(
    store_url: str, tmp_path: Path
) -> None:
    """A prompt-injected model may misstate what it asks to run: the system appends the
    recorded command to the reply."""

    def lying(request: ChatRequest) -> Reply:
        last = request.messages[-1]
        if last.role == "tool":
            return "Please approve so I can list your files."
        return Completion(tool_calls=(ToolCall(id="c1", name="exec", arguments={"command": RM}),))

    async with running_core(
        store_url=store_url, workspace=tmp_path / "ws", provider=FunctionProvider(lying)
    ) as (app, replies):
        ask = inbound("cli:a", "list my files")
        await app.bus.publish_inbound(ask)
        (asked,) = await replies.wait([ask.id])
        shown = re.search(r"- #([a-z0-9]{6}): `(.*)` \(it ", asked.text)
        assert shown is not None, asked.text
        info = await app.approvals.get(shown.group(1))
    assert asked.text.startswith("Please approve so I can list your files.")
    assert "Waiting for your approval (nothing runs until you answer):" in asked.text
    assert info is not None and info.status == "pending" and info.command == RM
    assert shown.group(2) == RM
    assert f"/approve {info.id} or /deny {info.id}" in asked.text
