"""A session's conversation as the panel shows it: turns of a user message, the steps
taken for it (tool calls, subagents, approvals) and the reply.

Built from what ``GET /v1/sessions/{key}?events=1`` answers: the history (messages with
the id of the inbound message whose turn wrote them) and the event log.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from core.tools.approvals.display import escaped_if_hidden

__all__ = ["SHOWN_EVENTS", "SHOWN_TURNS", "Step", "Turn", "event_rows", "steps_of", "turns_of"]

_RESULT_CHARS = 4000
"""How much of a tool's result or a subagent's answer a step shows."""
SHOWN_TURNS = 100
"""The newest turns a page shows of a session (``familiar sessions show`` has them all):
rendering thousands of Markdown replies would hold up the gateway's event loop for
seconds."""
SHOWN_EVENTS = 500
"""The newest events a page shows of a session's log (likewise)."""


@dataclass
class Step:
    """One collapsible step of a turn: a tool call or a subagent (or an approval)."""

    kind: str
    """``tool``, ``subagent`` or ``approval``."""
    title: str
    detail: str = ""
    """What was asked: a tool's arguments, a subagent's description, a command."""
    result: str = ""
    state: str = "running"
    """``running``, ``done``, ``failed`` (or an approval's decision)."""
    link: str | None = None
    """Where to see more (a subagent's conversation)."""
    agent_id: str | None = None
    """A subagent's task id."""


@dataclass
class Turn:
    """A user message and what came of it (or a reply that came from elsewhere)."""

    message_id: str | None
    user: str | None = None
    replies: list[str] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    unread: bool = False
    at: float = 0.0


def _clip(text: str) -> str:
    return text if len(text) <= _RESULT_CHARS else text[:_RESULT_CHARS] + " …"


def _arguments(value: Any) -> str:
    if not value:
        return ""
    return _clip(json.dumps(value, ensure_ascii=False, indent=1, default=str))


def _ended(events: Iterable[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    """The ``subagent.completed``/``failed`` events by agent id (recorded in the parent's
    session without a message id: a background subagent ends after its turn)."""
    return {
        str((e.get("data") or {}).get("agent_id")): e
        for e in events
        if e.get("type") in ("subagent.completed", "subagent.failed")
    }


def steps_of(
    events: Iterable[Mapping[str, Any]], ended: Mapping[str, Mapping[str, Any]] | None = None
) -> list[Step]:
    """The steps the events of one message record, in the order they started.

    Args:
        events: the message's events.
        ended: the session's subagent endings by agent id (see `_ended`).
    """
    steps: dict[str, Step] = {}
    for event in [*events, *(ended or {}).values()]:
        kind = str(event.get("type", ""))
        data = event.get("data") or {}
        if kind == "tool.execution_start":
            key = f"tool:{data.get('call_id')}"
            steps[key] = Step("tool", str(data.get("tool", "?")), _arguments(data.get("arguments")))
        elif kind == "tool.execution_complete":
            key = f"tool:{data.get('call_id')}"
            step = steps.setdefault(key, Step("tool", str(data.get("tool", "?"))))
            step.result = _clip(str(data.get("result", "")))
            step.state = "failed" if data.get("is_error") else "done"
        elif kind == "subagent.started":
            agent = str(data.get("agent_id", "?"))
            steps[f"agent:{agent}"] = Step(
                "subagent",
                f"{data.get('agent_type', 'agent')} ({data.get('mode', '')})",
                str(data.get("description") or ""),
                link="/ui/sessions?" + urlencode({"key": f"subagent:{agent}"}),
                agent_id=agent,
            )
        elif kind in ("subagent.completed", "subagent.failed"):
            started = steps.get(f"agent:{data.get('agent_id')}")
            if started is not None:  # (not another message's subagent, from ``ended``)
                started.result = _clip(str(data.get("result") or data.get("error") or ""))
                started.state = "done" if kind == "subagent.completed" else "failed"
        elif kind in ("tool.approval_requested", "tool.approval_decided"):
            approval = str(data.get("approval_id", "?"))
            command = escaped_if_hidden(str(data.get("command") or ""))
            step = steps.setdefault(
                f"approval:{approval}", Step("approval", f"approval #{approval}", command)
            )
            step.result = str(data.get("reason", ""))
            step.state = str(data.get("decision") or "waiting")
    return list(steps.values())


def turns_of(
    history: Iterable[Mapping[str, Any]], events: Iterable[Mapping[str, Any]]
) -> list[Turn]:
    """The session's turns, oldest first (history rows of one inbound message form one)."""
    by_message: dict[str, list[Mapping[str, Any]]] = {}
    events = list(events)
    ended = _ended(events)
    for event in events:
        if event.get("message_id"):
            by_message.setdefault(str(event["message_id"]), []).append(event)
    turns: list[Turn] = []
    index: dict[str, Turn] = {}
    for row in history:
        message_id = row.get("message_id")
        turn = index.get(message_id) if message_id else None
        if turn is None:
            turn = Turn(message_id=message_id, at=float(row.get("at") or 0.0))
            turns.append(turn)
            if message_id:
                index[message_id] = turn
                turn.steps = steps_of(by_message.get(message_id, ()), ended)
        role, content = row.get("role"), str(row.get("content") or "")
        if role == "user" and turn.user is None:
            turn.user = content
        elif role == "assistant" and content.strip():
            turn.replies.append(content)
            turn.unread = turn.unread or bool(row.get("unread"))
    return turns


def event_rows(events: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The event log as table rows: id, type, message, time, the data as compact JSON."""
    return [
        {
            "id": e.get("id"),
            "type": e.get("type"),
            "message_id": e.get("message_id") or "",
            "at": float(e.get("at") or 0.0),
            "data": _clip(json.dumps(e.get("data") or {}, ensure_ascii=False, default=str)),
        }
        for e in events
    ]
