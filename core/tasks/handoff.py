"""The handoff: how a subagent's result reaches its parent (tool result or new message)."""

from __future__ import annotations

import json
from typing import Any

from core.messages import Delivery, InboundMessage
from core.tasks.records import TaskRecord

__all__ = ["HANDOFF_MARKER", "clip", "handoff_fields", "handoff_message"]

HANDOFF_MARKER = "[subagent handoff]"
"""Starts every handoff message, so the parent model reads it as a subagent's report."""


def clip(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters with a marker saying how much was left out."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n[... {len(text) - limit} more characters: subagents read ...]"


def handoff_fields(task: TaskRecord, *, status: str, result: str, limit: int) -> dict[str, Any]:
    """The structured handoff: agent id, type, status and result."""
    return {
        "agent_id": task.id,
        "agent_type": task.agent_type,
        "name": task.name,
        "status": status,
        "result": clip(result, limit),
    }


def handoff_message(
    task: TaskRecord, *, inbound_id: str, status: str, result: str, limit: int
) -> InboundMessage:
    """The message a finished background agent puts into its parent's session.

    Its ``event_id`` is derived from the child message it answers, so however often a
    crash makes the registry hand the same answer over, the parent gets it once.
    """
    fields = handoff_fields(task, status=status, result=result, limit=limit)
    text = (
        f"{HANDOFF_MARKER} Subagent {task.id} ({task.agent_type}) finished with status "
        f"{status}. This is its report, not a message from the user:\n"
        f"{json.dumps(fields, ensure_ascii=False, indent=1)}"
    )
    return InboundMessage(
        session_key=task.owner_key,
        text=text,
        delivery=Delivery.model_validate_json(task.delivery),
        sender=task.child_key,
        origin="subagent",
        event_id=f"handoff:{inbound_id}",
    )
