"""The approval routes of the control API against a real core: list every session's
pending approvals, answer one as the control panel's operator, refuse what cannot be.

The provider is scripted as in test_approvals: ``run <command>`` calls ``exec``.
"""

from __future__ import annotations

import time
from pathlib import Path

from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from core.event_data import ApprovalDecided
from core.providers.scripted import FunctionProvider
from core.tools import ExecConfig, ToolsConfig
from core.tools.approvals import outcome_message_id
from gateway.control.approvals import add_approval_routes
from tests.integration.harness import inbound, running_core
from tests.integration.test_approvals import DECODE, RM, approval_id, script
from tests.waiting import eventually

UNSANDBOXED = ToolsConfig(exec=ExecConfig(sandbox="none"))
"""What runs here is ``echo hi`` only (the ``rm`` one is only ever denied)."""


async def test_list_and_approve_as_the_operator(store_url: str, tmp_path: Path) -> None:
    async with running_core(
        store_url=store_url,
        workspace=tmp_path / "ws",
        provider=FunctionProvider(script),
        tools=UNSANDBOXED,
    ) as (app, replies):
        asks = [inbound("cli:a", f"run {DECODE}"), inbound("slack:C1", f"run {RM}")]
        for ask in asks:
            await app.bus.publish_inbound(ask)
        asked = await replies.wait([a.id for a in asks])
        first, second = (approval_id(r.text) for r in asked)
        web_app = web.Application()
        add_approval_routes(web_app, app.approvals, app.bus)
        async with TestClient(TestServer(web_app)) as client:
            listed = await (await client.get("/v1/approvals")).json()
            pending = {a["id"]: a for a in listed["pending"]}
            assert set(pending) == {first, second} and listed["decided"] == []
            row = pending[first]
            assert (row["session"], row["channel"], row["command"]) == ("cli:a", "test", DECODE)
            assert row["status"] == "pending" and row["intact"] is True
            assert row["requested_at"] < row["expires_at"]
            assert row["reason"].startswith("pipes text into a shell")

            answer = {"decision": "approve", "operator": "alice"}
            decided = await client.post(f"/v1/approvals/{first}", json=answer)
            assert decided.status == 200
            body = await decided.json()
            assert body["reply"] == {
                "kind": "reply",
                "text": f"Approved #{first}: `{DECODE}` ran (exit 0).",
            }
            assert body["approval"]["status"] == "approved"
            assert body["approval"]["decided_by"] == "ui:alice"
            (outcome,) = await replies.wait([outcome_message_id(first)])
            assert outcome.text.endswith("ran: exit 0, output:\nhi")

            again = await client.post(f"/v1/approvals/{first}", json=answer)
            assert again.status == 409
            assert (await again.json())["error"] == f"approval #{first} was already approved"

            listed = await (await client.get("/v1/approvals?decided=5")).json()
            assert [a["id"] for a in listed["pending"]] == [second]
            assert [(a["id"], a["decided_by"]) for a in listed["decided"]] == [(first, "ui:alice")]
            shown = await (await client.get(f"/v1/approvals/{first}")).json()
            assert shown["status"] == "approved"
        events = await app.events.list("cli:a")
    decisions = [e.data for e in events if isinstance(e.data, ApprovalDecided)]
    assert [(d.approval_id, d.decided_by) for d in decisions] == [(first, "ui:alice")]


async def test_deny_and_bad_requests_change_nothing(store_url: str, tmp_path: Path) -> None:
    async with running_core(
        store_url=store_url,
        workspace=tmp_path / "ws",
        provider=FunctionProvider(script),
        tools=UNSANDBOXED,
    ) as (app, replies):
        ask = inbound("cli:b", f"run {RM}")
        await app.bus.publish_inbound(ask)
        (asked,) = await replies.wait([ask.id])
        aid = approval_id(asked.text)
        web_app = web.Application()
        add_approval_routes(web_app, app.approvals, app.bus)
        async with TestClient(TestServer(web_app)) as client:
            bad_bodies = [
                {"decision": "maybe", "operator": "alice"},
                {"decision": "approve", "operator": "alice;rm"},
                {"decision": "approve"},
                {"decision": "approve", "operator": "alice", "wait": 500},
            ]
            for bad in bad_bodies:
                answer = await client.post(f"/v1/approvals/{aid}", json=bad)
                assert answer.status == 400, bad
            unknown = await client.post(
                "/v1/approvals/zzzzzz", json={"decision": "deny", "operator": "bob"}
            )
            assert unknown.status == 404
            assert (await client.get("/v1/approvals/..%2F")).status == 404
            assert (await client.get("/v1/approvals?decided=lots")).status == 400
            info = await app.approvals.get(aid)
            assert info is not None and info.status == "pending"

            denied = await client.post(
                f"/v1/approvals/{aid}", json={"decision": "deny", "operator": "bob"}
            )
            body = await denied.json()
        info = await app.approvals.get(aid)
    assert body["reply"]["text"] == f"Denied #{aid}: `{RM}` will not run."
    assert info is not None and (info.status, info.decided_by) == ("denied", "ui:bob")


async def test_an_expired_approval_cannot_be_answered(store_url: str, tmp_path: Path) -> None:
    tools = ToolsConfig(exec=ExecConfig(sandbox="none", approval_timeout=0.5))
    async with running_core(
        store_url=store_url,
        workspace=tmp_path / "ws",
        provider=FunctionProvider(script),
        tools=tools,
    ) as (app, replies):
        ask = inbound("cli:c", f"run {RM}")
        await app.bus.publish_inbound(ask)
        (asked,) = await replies.wait([ask.id])
        aid = approval_id(asked.text)
        info = await app.approvals.get(aid)
        assert info is not None
        await eventually(lambda: time.time() > info.expires_at, what="the approval ran out")
        web_app = web.Application()
        add_approval_routes(web_app, app.approvals, app.bus)
        async with TestClient(TestServer(web_app)) as client:
            listed = await (await client.get("/v1/approvals")).json()
            answer = await client.post(
                f"/v1/approvals/{aid}", json={"decision": "approve", "operator": "alice"}
            )
            refused = await answer.json()
        after = await app.approvals.get(aid)
    assert listed["pending"] == []
    assert answer.status == 409
    assert refused["error"] == f"approval #{aid} expired unanswered; `{RM}` was not run"
    assert after is not None and after.decided_by is None
