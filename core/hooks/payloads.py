"""The JSON document written to a hook's stdin, per event and dialect.

``copilot`` (camelCase event names) follows GitHub's hooks reference: ``sessionId``,
``timestamp`` (epoch ms), ``cwd`` and each event's fields, ``toolArgs`` as a JSON
*string* (GitHub's tutorial and example scripts parse it with ``jq -r '.toolArgs' | jq``;
the reference types it ``unknown`` and says the snake_case ``tool_input`` is "parsed
from JSON string"). ``claude`` (PascalCase event names) follows Claude Code's hooks
reference (``session_id``, ``transcript_path``, ``cwd``, ``permission_mode``,
``hook_event_name``, Claude's tool names and argument names), plus the fields GitHub's
VS Code-compatible format adds for PascalCase names (ISO ``timestamp``,
``initial_prompt``, ``tool_result``, ``stop_reason``). Both carry a few fields of
familiar's own (``channel``, the agent and its depth, the message): docs/formats/hooks.md.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from .dialects import COPILOT_TOOLS, Facts, claude_tool_response, to_claude
from .names import Dialect, HookEvent

__all__ = ["CLAUDE_END_REASONS", "COPILOT_END_REASONS", "payload"]

COPILOT_END_REASONS = {"new": "user_exit"}
"""Why a session ended (ours) as GitHub names it (``complete|error|abort|timeout|
user_exit``): ``/new`` is the user ending it. Anything else: ``complete``."""
CLAUDE_END_REASONS = {"new": "clear"}
"""The same for Claude Code (``clear|logout|prompt_input_exit|other``...): ``/new`` is
its ``/clear``. Anything else: ``other``."""
_CLAUDE_SOURCES = {"new": "clear"}
"""sessionStart ``source`` for Claude Code: the session after ``/clear`` starts ``clear``."""
_END_TURN = "end_turn"
"""The only ``stopReason`` GitHub documents; ours (answered, task_complete,
max_iterations) go in ``turnEnd`` / ``turn_end``."""
_CLAUDE_ERRORS = {
    "ProviderRateLimited": "rate_limit",
    "ProviderRejected": "invalid_request",
    "ProviderUnavailable": "server_error",
}
"""Our provider errors as Claude Code's ``StopFailure`` ``error`` names them (else
``unknown``)."""


def _args_text(args: dict[str, Any] | None) -> str:
    return json.dumps(args or {}, separators=(",", ":"), ensure_ascii=False, default=str)


def _error_context(kind: str | None) -> str:
    return "model_call" if kind and kind.startswith("Provider") else "system"


def payload(facts: Facts, *, event: HookEvent, event_name: str, dialect: Dialect) -> bytes:
    """The JSON document written to a hook's stdin."""
    now = datetime.now(UTC)
    doc: dict[str, Any]
    if dialect == "copilot":
        doc = {"sessionId": facts.session_key, "timestamp": int(now.timestamp() * 1000)}
        doc["cwd"] = facts.cwd
        doc |= _COPILOT[event](facts)
        extras = _copilot_extras(facts, event)
    else:
        doc = {
            "session_id": facts.session_key,
            "transcript_path": facts.transcript_path,
            "cwd": facts.cwd,
            "permission_mode": "default",
            "hook_event_name": event_name,
            "timestamp": now.isoformat(),
        }
        if event is HookEvent.ERROR_OCCURRED and event_name.lower() == "stopfailure":
            doc |= _claude_stop_failure(facts)
        else:
            doc |= _CLAUDE[event](facts)
        extras = _claude_extras(facts, event)
    doc |= {k: v for k, v in extras.items() if v is not None and k not in doc}
    return json.dumps(doc, default=str, ensure_ascii=False).encode()


# camelCase: GitHub's hooks reference, event by event


def _copilot_tool(f: Facts) -> dict[str, Any]:
    name = COPILOT_TOOLS.get(f.tool_name or "", f.tool_name)
    return {"toolName": name, "toolArgs": _args_text(f.tool_args)}


def _copilot_start(f: Facts) -> dict[str, Any]:
    doc: dict[str, Any] = {"source": f.source or "startup"}
    if f.prompt is not None:
        doc["initialPrompt"] = f.prompt
    return doc


def _copilot_post(f: Facts) -> dict[str, Any]:
    result = {"resultType": "success", "textResultForLlm": f.tool_result or ""}
    return {**_copilot_tool(f), "toolResult": result}


def _copilot_error(f: Facts) -> dict[str, Any]:
    return {
        "error": {"message": f.error or "", "name": f.error_kind or "Error"},
        "errorContext": _error_context(f.error_kind),
        "recoverable": False,
    }


_COPILOT: dict[HookEvent, Callable[[Facts], dict[str, Any]]] = {
    HookEvent.SESSION_START: _copilot_start,
    HookEvent.SESSION_END: lambda f: {
        "reason": COPILOT_END_REASONS.get(f.reason or "", "complete")
    },
    HookEvent.USER_PROMPT_SUBMITTED: lambda f: {"prompt": f.prompt or ""},
    HookEvent.PRE_TOOL_USE: _copilot_tool,
    HookEvent.POST_TOOL_USE: _copilot_post,
    HookEvent.POST_TOOL_USE_FAILURE: lambda f: {**_copilot_tool(f), "error": f.tool_result or ""},
    HookEvent.AGENT_STOP: lambda f: {"transcriptPath": f.transcript_path, "stopReason": _END_TURN},
    HookEvent.SUBAGENT_START: lambda f: {
        "transcriptPath": f.transcript_path,
        "agentName": f.agent_type,
    },
    HookEvent.SUBAGENT_STOP: lambda f: {
        "transcriptPath": f.transcript_path,
        "agentName": f.agent_type,
        "stopReason": _END_TURN,
    },
    HookEvent.ERROR_OCCURRED: _copilot_error,
}


def _copilot_extras(f: Facts, event: HookEvent) -> dict[str, Any]:
    return {
        "channel": f.channel,
        "agentName": f.agent_type,
        "agentDepth": f.depth,
        "messageId": f.message_id or None,
        "origin": f.origin,
        "agentId": f.agent_id,
        "turnEnd": f.stop_reason,
        "stop_hook_active": f.stop_hook_active,
        "lastAssistantMessage": f.last_message,
        "toolCallId": f.call_id,
        "prompt": f.prompt if event is HookEvent.SUBAGENT_START else None,
    }


# PascalCase: Claude Code's hooks reference (+ GitHub's VS Code-compatible fields)


def _claude_tool(f: Facts) -> dict[str, Any]:
    name, given = to_claude(f.tool_name or "", f.tool_args or {})
    doc: dict[str, Any] = {"tool_name": name, "tool_input": given}
    if f.call_id is not None:
        doc["tool_use_id"] = f.call_id
    return doc


def _claude_start(f: Facts) -> dict[str, Any]:
    doc: dict[str, Any] = {"source": _CLAUDE_SOURCES.get(f.source or "", f.source or "startup")}
    if f.model is not None:
        doc["model"] = f.model
    if f.prompt is not None:
        doc["initial_prompt"] = f.prompt
    return doc


def _claude_post(f: Facts) -> dict[str, Any]:
    result = f.tool_result or ""
    return {
        **_claude_tool(f),
        "tool_response": claude_tool_response(f.tool_name or "", f.tool_args, result),
        "tool_result": {"result_type": "success", "text_result_for_llm": result},
    }


def _claude_stop(f: Facts) -> dict[str, Any]:
    return {
        "stop_hook_active": bool(f.stop_hook_active),
        "last_assistant_message": f.last_message or "",
        "stop_reason": _END_TURN,
    }


def _claude_subagent_stop(f: Facts) -> dict[str, Any]:
    return {
        "stop_hook_active": bool(f.stop_hook_active),
        "agent_id": f.agent_id,
        "agent_type": f.agent_type,
        "agent_transcript_path": f.agent_transcript_path,
        "last_assistant_message": f.last_message or "",
        "stop_reason": _END_TURN,
    }


def _claude_error(f: Facts) -> dict[str, Any]:
    """GitHub's VS Code-compatible ``ErrorOccurred``."""
    return {
        "error": {"message": f.error or "", "name": f.error_kind or "Error"},
        "error_context": _error_context(f.error_kind),
        "recoverable": False,
    }


def _claude_stop_failure(f: Facts) -> dict[str, Any]:
    """Claude Code's ``StopFailure`` (our ``errorOccurred`` under that name)."""
    return {
        "error": _CLAUDE_ERRORS.get(f.error_kind or "", "unknown"),
        "error_details": f.error or "",
        "last_assistant_message": f.last_message or "",
    }


_CLAUDE: dict[HookEvent, Callable[[Facts], dict[str, Any]]] = {
    HookEvent.SESSION_START: _claude_start,
    HookEvent.SESSION_END: lambda f: {"reason": CLAUDE_END_REASONS.get(f.reason or "", "other")},
    HookEvent.USER_PROMPT_SUBMITTED: lambda f: {"prompt": f.prompt or ""},
    HookEvent.PRE_TOOL_USE: _claude_tool,
    HookEvent.POST_TOOL_USE: _claude_post,
    HookEvent.POST_TOOL_USE_FAILURE: lambda f: {
        **_claude_tool(f),
        "error": f.tool_result or "",
        "is_interrupt": False,
    },
    HookEvent.AGENT_STOP: _claude_stop,
    HookEvent.SUBAGENT_START: lambda f: {"agent_id": f.agent_id, "agent_type": f.agent_type},
    HookEvent.SUBAGENT_STOP: _claude_subagent_stop,
    HookEvent.ERROR_OCCURRED: _claude_error,
}


def _claude_extras(f: Facts, event: HookEvent) -> dict[str, Any]:
    return {
        "channel": f.channel,
        "agent_type": f.agent_type,
        "agent_depth": f.depth,
        "message_id": f.message_id or None,
        "origin": f.origin,
        "turn_end": f.stop_reason,
        "prompt": f.prompt if event is HookEvent.SUBAGENT_START else None,
    }
