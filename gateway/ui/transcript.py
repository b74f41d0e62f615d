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

__all__ = ["Step", "Turn", "event_rows", "steps_of", "turns_of"]

_RESULT_CHARS = 4000
"""How much of a tool's result or a subagent's answer a step shows."""


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
    """Where to see more (a subagent's page)."""


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


def steps_of(events: Iterable[Mapping[str, Any]]) -> list[Step]:
    """The steps the events of one message record, in the order they started."""
    steps: dict[str, Step] = {}
    for event in events:
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
                link=f"/ui/tasks?task={agent}",
            )
        elif kind in ("subagent.completed", "subagent.failed"):
            agent = str(data.get("agent_id", "?"))
            step = steps.setdefault(
                f"agent:{agent}", Step("subagent", str(data.get("agent_type", "agent")))
            )
            step.result = _clip(str(data.get("result") or data.get("error") or ""))
            step.state = "done" if kind == "subagent.completed" else "failed"
        elif kind in ("tool.approval_requested", "tool.approval_decided"):
            approval = str(data.get("approval_id", "?"))
            step = steps.setdefault(
                f"approval:{approval}",
                Step("approval", f"approval #{approval}", str(data.get("command", ""))),
            )
            step.result = str(data.get("reason", ""))
            step.state = str(data.get("decision") or "waiting")
    return list(steps.values())


def turns_of(
    history: Iterable[Mapping[str, Any]], events: Iterable[Mapping[str, Any]]
) -> list[Turn]:
    """The session's turns, oldest first (history rows of one inbound message form one)."""
    by_message: dict[str, list[Mapping[str, Any]]] = {}
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
                turn.steps = steps_of(by_message.get(message_id, ()))
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
