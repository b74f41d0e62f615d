"""The two hook dialects: the JSON payload written to a hook, and its answer read back.

``copilot`` (camelCase event names): camelCase payload with ``sessionId`` and an epoch-ms
``timestamp``. ``claude`` (PascalCase event names): snake_case payload with
``session_id`` and ``hook_event_name``. Answers are read leniently in both: top-level
``permissionDecision`` / ``decision`` and ``hookSpecificOutput.*``, ``modifiedArgs`` and
``updatedInput`` alike (conventions.md §2).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from .names import Dialect, HookEvent

__all__ = [
    "CLAUDE_TOOLS",
    "COPILOT_TOOLS",
    "Answer",
    "Facts",
    "from_claude_args",
    "parse_answer",
    "payload",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class Facts:
    """What an event is about, dialect-neutral; ``payload`` renders it per dialect."""

    session_key: str
    cwd: str
    channel: str = ""
    agent_type: str = "main"
    depth: int = 0
    message_id: str = ""
    origin: str | None = None
    prompt: str | None = None
    source: str | None = None
    """sessionStart: ``startup`` (a new session) or ``new`` (after ``/new``)."""
    tool_name: str | None = None
    tool_args: dict[str, Any] | None = None
    call_id: str | None = None
    tool_result: str | None = None
    tool_failed: bool = False
    stop_reason: str | None = None
    stop_hook_active: bool | None = None
    last_message: str | None = None
    reason: str | None = None
    """sessionEnd: why it ended."""
    error: str | None = None
    error_kind: str | None = None
    parent_session_key: str | None = None
    """subagent events: the parent's session (``session_key`` is the child's)."""


_COPILOT_KEYS = {
    "channel": "channel",
    "agent_type": "agentName",
    "depth": "agentDepth",
    "message_id": "messageId",
    "origin": "origin",
    "prompt": "prompt",
    "source": "source",
    "tool_name": "toolName",
    "tool_args": "toolArgs",
    "call_id": "toolCallId",
    "stop_reason": "stopReason",
    "stop_hook_active": "stop_hook_active",
    "last_message": "lastAssistantMessage",
    "reason": "reason",
    "parent_session_key": "parentSessionId",
}
_CLAUDE_KEYS = {
    "channel": "channel",
    "agent_type": "agent_type",
    "depth": "agent_depth",
    "message_id": "message_id",
    "origin": "origin",
    "prompt": "prompt",
    "source": "source",
    "tool_name": "tool_name",
    "tool_args": "tool_input",
    "call_id": "tool_use_id",
    "tool_result": "tool_response",
    "stop_reason": "stop_reason",
    "stop_hook_active": "stop_hook_active",
    "last_message": "last_assistant_message",
    "reason": "reason",
    "error": "error",
    "error_kind": "error_type",
    "parent_session_key": "parent_session_id",
}


CLAUDE_TOOLS: dict[str, tuple[str, dict[str, str]]] = {
    "exec": ("Bash", {"command": "command", "timeout": "timeout"}),
    "read_file": ("Read", {"path": "file_path"}),
    "write_file": ("Write", {"path": "file_path", "content": "content"}),
    "edit_file": (
        "Edit",
        {"path": "file_path", "old_text": "old_string", "new_text": "new_string"},
    ),
    "list_dir": ("LS", {"path": "path"}),
    "sessions_spawn": ("Task", {"agent_type": "subagent_type", "prompt": "prompt"}),
}
"""Our tools as Claude Code names them, and their arguments (conventions §2.1): a Claude
hook script checks ``tool_name == "Bash"`` and reads ``tool_input.file_path``, so with our
names it would let every call through. Other arguments keep their names."""


COPILOT_TOOLS = {"exec": "bash"}
"""Our tools as Copilot CLI names them where a policy script is likely to check the name
(GitHub's example hook tests ``toolName == "bash"``); arguments keep their names
(``command`` is Copilot's too)."""


def _to_claude(tool: str, args: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    name, keys = CLAUDE_TOOLS.get(tool, (tool, {}))
    out = {keys.get(k, k): v for k, v in args.items()}
    if tool == "exec" and isinstance(out.get("timeout"), int | float):
        out["timeout"] = int(out["timeout"] * 1000)  # Claude's Bash timeout is in ms
    return name, out


def from_claude_args(tool: str, args: dict[str, Any]) -> dict[str, Any]:
    """A Claude hook's ``updatedInput`` for our ``tool``, in our argument names."""
    back = {v: k for k, v in CLAUDE_TOOLS.get(tool, ("", {}))[1].items()}
    out = {back.get(k, k): v for k, v in args.items()}
    if tool == "exec" and isinstance(out.get("timeout"), int | float):
        out["timeout"] = out["timeout"] / 1000
    return out


def payload(facts: Facts, *, event: HookEvent, event_name: str, dialect: Dialect) -> bytes:
    """The JSON document written to a hook's stdin."""
    now = datetime.now(UTC)
    if dialect == "copilot":
        doc: dict[str, Any] = {
            "sessionId": facts.session_key,
            "timestamp": int(now.timestamp() * 1000),
            "cwd": facts.cwd,
        }
        keys = _COPILOT_KEYS
        if facts.tool_result is not None:
            doc["toolResult"] = {
                "resultType": "failure" if facts.tool_failed else "success",
                "textResultForLlm": facts.tool_result,
            }
        if facts.error is not None:
            doc["error"] = {"message": facts.error, "name": facts.error_kind or "Error"}
    else:
        doc = {
            "session_id": facts.session_key,
            "hook_event_name": event_name,
            "timestamp": now.isoformat(),
            "cwd": facts.cwd,
            "transcript_path": None,
            "permission_mode": "default",
        }
        keys = _CLAUDE_KEYS
        if facts.source == "new":
            facts = replace(facts, source="clear")  # Claude Code's name for /clear
    for field_name, key in keys.items():
        value = getattr(facts, field_name)
        if value is not None:
            doc[key] = value
    if dialect == "copilot" and facts.tool_name is not None:
        doc["toolName"] = COPILOT_TOOLS.get(facts.tool_name, facts.tool_name)
    if dialect == "claude" and facts.tool_name is not None:
        doc["tool_name"], doc["tool_input"] = _to_claude(facts.tool_name, facts.tool_args or {})
    if event in (HookEvent.SUBAGENT_START, HookEvent.SUBAGENT_STOP) and dialect == "claude":
        doc["agent_id"] = facts.session_key
    return json.dumps(doc, default=str).encode()


@dataclass(frozen=True, slots=True)
class Answer:
    """What one hook decided. ``block`` is a deny (preToolUse) or a block (others)."""

    block: str | None = None
    context: str | None = None
    args: dict[str, Any] | None = None


_BLOCKING = {"deny", "block", "ask"}


def _json_object(text: str) -> dict[str, Any] | None:
    """The answer object in ``text``: the whole of it, or the last line that is an
    object other than a Copilot progress line."""
    text = text.strip()
    if not text:
        return None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError:
        doc = None
        for line in reversed(text.splitlines()):
            try:
                candidate = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(candidate, dict) and candidate.get("type") != "progress":
                doc = candidate
                break
        if doc is None:
            raise
    if not isinstance(doc, dict):
        raise ValueError("the hook's output is JSON but not an object")
    return doc


def parse_answer(stdout: str, *, event: HookEvent, dialect: Dialect) -> Answer:
    """Read the decision a hook printed (exit code 0).

    Raises:
        ValueError: the output is not a JSON object (plain text is context for
            Claude-dialect sessionStart / userPromptSubmitted hooks, as in Claude Code).
    """
    try:
        doc = _json_object(stdout)
    except ValueError:
        if dialect == "claude" and event in (
            HookEvent.SESSION_START,
            HookEvent.USER_PROMPT_SUBMITTED,
        ):
            return Answer(context=stdout.strip())
        raise
    if doc is None:
        return Answer()
    specific = doc.get("hookSpecificOutput")
    if not isinstance(specific, dict):
        specific = {}

    def pick(*keys: str) -> Any:
        for key in keys:
            for where in (specific, doc):
                if where.get(key) is not None:
                    return where[key]
        return None

    decision = pick("permissionDecision", "decision", "behavior")
    reason = pick("permissionDecisionReason", "reason", "message", "stopReason")
    block = None
    if isinstance(decision, str) and decision.lower() in _BLOCKING:
        block = str(reason) if reason else f"blocked by a {event.value} hook"
    args = pick("modifiedArgs", "updatedInput")
    if args is not None and not isinstance(args, dict):
        raise ValueError("modifiedArgs / updatedInput is not a JSON object")
    context = pick("additionalContext")
    return Answer(
        block=block,
        context=str(context) if context else None,
        args=args,
    )
