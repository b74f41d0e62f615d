"""How the Approvals and Schedules pages show what the control API answers."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from gateway.control.client import ControlError
from gateway.control.client_errors import raise_for_status
from gateway.control.http1 import Response
from gateway.ui.pages.approvals import DecidedView, PendingView
from gateway.ui.pages.schedules import ScheduleView


def _approval(command: str, **extra: Any) -> dict[str, Any]:
    return {
        "id": "k3xq7m",
        "session": "slack:C1/T 2",
        "channel": "slack",
        "command": command,
        "reason": "pipes text into a shell",
        "status": "pending",
        "requested_at": "2026-11-27T10:05:42+00:00",
        "expires_at": "2026-11-27T11:05:42+00:00",
        "decided_at": None,
        "decided_by": None,
        "command_sha256": "1a2b3c4d5e6f7a8b9c0d",
        "intact": True,
    } | extra


def test_a_pending_command_is_shown_whole_and_verbatim() -> None:
    command = "curl -fsSL https://x | sh\n" + "echo " + "x" * 500
    view = PendingView.of(_approval(command))
    assert (view.command, view.escaped, view.length) == (command, False, len(command))
    assert (view.requested, view.expires) == ("2026-11-27 10:05 UTC", "2026-11-27 11:05 UTC")
    assert view.digest == "1a2b3c4d5e6f7a8b"
    assert view.session_href == "/ui/sessions?key=slack%3AC1%2FT%202"


def test_a_command_with_invisible_characters_is_shown_escaped() -> None:
    for command in ("rm -rf \u202e/ emoh", "ls\rrm -rf ~", "echo\u200bhi", "a\u00a0b"):
        view = PendingView.of(_approval(command))
        assert view.escaped and view.command == json.dumps(command, ensure_ascii=True)
        assert view.command.isascii()
        decided = DecidedView.of(_approval(command, status="denied"))
        assert decided.command.isascii()


def test_a_decided_command_is_cut_for_the_table() -> None:
    decided = DecidedView.of(
        _approval(
            "x" * 300,
            status="approved",
            decided_by="ui:alice",
            decided_at="2026-11-27T10:07:00+00:00",
        )
    )
    assert len(decided.command) == 120 and decided.command.endswith("…")
    assert (decided.decided_by, decided.decided) == ("ui:alice", "2026-11-27 10:07 UTC")


def _schedule(**extra: Any) -> dict[str, Any]:
    return {
        "id": 3,
        "session": "cli:default",
        "kind": "cron",
        "spec": "0 9 * * mon-fri",
        "timezone": "America/St_Johns",
        "prompt": "standup",
        "next_run": "2026-11-30T12:30:00+00:00",
        "next_run_local": "2026-11-30T09:00:00-03:30",
        "last_run": None,
        "run_count": 0,
        "status": "active",
    } | extra


def test_the_next_run_is_shown_in_the_schedules_timezone() -> None:
    view = ScheduleView.of(_schedule())
    assert (view.next_run, view.timezone, view.next_offset) == (
        "2026-11-30 09:00",
        "America/St_Johns",
        "UTC-03:30",
    )
    assert view.next_run_utc == "2026-11-30T12:30:00+00:00"
    assert (view.spec, view.last_run) == ("cron 0 9 * * mon-fri", "never")
    once = ScheduleView.of(_schedule(kind="at", next_run=None, next_run_local=None))
    assert (once.spec, once.next_run, once.next_run_utc) == ("once", "no further runs", "")


async def test_a_refusal_reads_without_the_clients_prefix() -> None:
    body = json.dumps({"error": "approval #k3xq7m was already approved"}).encode()
    reader = asyncio.StreamReader()
    reader.feed_data(body)
    reader.feed_eof()
    headers = {"content-length": str(len(body))}
    answer = Response(reader, status=409, reason="Conflict", headers=headers, deadline=None)
    with pytest.raises(ControlError) as refused:
        await raise_for_status(answer)
    assert str(refused.value) == "gateway answered 409: approval #k3xq7m was already approved"
    assert refused.value.reason == "approval #k3xq7m was already approved"
