"""Typed event payloads: public names, JSON round trip, unknown types kept."""

from __future__ import annotations

from typing import Any

import pytest

from core.event_data import (
    ApprovalDecided,
    ApprovalRequested,
    AssistantMessage,
    EventPayload,
    EventType,
    Idle,
    ScheduleCreated,
    ScheduleFired,
    ScheduleMissed,
    SessionError,
    TaskComplete,
    ToolComplete,
    ToolStart,
    TurnEnd,
    TurnStart,
    UnknownEvent,
    UserMessage,
    fields_of,
    payload_of,
    type_of,
)
from core.events import Event, EventLog
from core.store.engine import Store

SAMPLES: list[EventPayload] = [
    UserMessage(text="hi", origin="user", sender="ann", attempt=2),
    TurnStart(iteration=1),
    AssistantMessage(content="ok", tool_calls=["read_file"], usage={"input_tokens": 3}),
    ToolStart(tool="read_file", call_id="c1", arguments={"path": "a.md"}),
    ToolComplete(tool="read_file", call_id="c1", is_error=False, result="text"),
    TurnEnd(iteration=1),
    Idle(llm_calls=2, stop="answered"),
    TaskComplete(summary="done"),
    SessionError(error="boom", kind="ProviderError"),
    ScheduleCreated(
        schedule_id=3, kind="every", spec="5m", timezone="UTC", prompt="p", status="active"
    ),
    ScheduleFired(schedule_id=3, firing_id="f", due="2026-01-01T00:00:00+00:00", late_s=2.5),
    ScheduleMissed(schedule_id=3, due="2026-01-01T00:00:00+00:00", reason="missed by 1h"),
    ApprovalRequested(approval_id="k3xq7m", command="rm -rf /", reason="deletes /"),
    ApprovalDecided(
        approval_id="k3xq7m", command="rm -rf /", reason="deletes /", decision="denied"
    ),
]


def test_public_names_are_unchanged() -> None:
    assert EventType.USER_MESSAGE == "user.message"
    assert EventType.TURN_START == "assistant.turn_start"
    assert EventType.TOOL_COMPLETE == "tool.execution_complete"
    assert EventType.IDLE == "session.idle"
    assert EventType.SCHEDULE_CREATED == "session.schedule_created"
    assert EventType.HOOK_BLOCKED == "hook.blocked"
    assert EventType.APPROVAL_REQUESTED == "tool.approval_requested"
    assert EventType.APPROVAL_DECIDED == "tool.approval_decided"


@pytest.mark.parametrize("payload", SAMPLES, ids=lambda p: type_of(p))
def test_payload_round_trips_through_its_json(payload: EventPayload) -> None:
    stored = fields_of(payload)
    assert None not in stored.values()
    assert payload_of(type_of(payload), stored) == payload


def test_unknown_or_incomplete_payloads_are_kept_as_read() -> None:
    data: dict[str, Any] = {"agent_id": "a1"}
    assert payload_of("subagent.started", data) == UnknownEvent(
        name="subagent.started", fields=data
    )
    assert isinstance(payload_of("tool.execution_start", {"call_id": "x"}), UnknownEvent)
    assert fields_of(UnknownEvent(name="x.y", fields=data)) == data


async def test_events_come_back_typed_from_the_store(store: Store) -> None:
    log = EventLog(store=store)
    await log.append(*(Event(session_key="cli:t", message_id="m1", data=p) for p in SAMPLES))
    back = await log.list("cli:t")
    assert [e.data for e in back] == SAMPLES
    assert [e.as_json()["type"] for e in back] == [type_of(p) for p in SAMPLES]


async def test_event_tail_is_the_newest_and_filtered_by_message(store: Store) -> None:
    log = EventLog(store=store)
    events = [
        Event(session_key="cli:t", message_id=f"m{i % 2}", data=TurnStart(iteration=i))
        for i in range(10)
    ]
    await log.append(*events)
    newest = await log.list("cli:t", limit=3)
    assert [e.data for e in newest] == [TurnStart(iteration=i) for i in (7, 8, 9)]
    of_one = await log.list("cli:t", message_id="m1", limit=2)
    assert [e.data for e in of_one] == [TurnStart(iteration=i) for i in (7, 9)]
