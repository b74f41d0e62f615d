"""The two hook dialects: what a hook is told (`Facts`, tool names) and its answer read back.

``copilot`` (camelCase event names) and ``claude`` (PascalCase event names); the payload
itself is `core.hooks.payloads`. Answers are read leniently in both: top-level
``permissionDecision`` / ``decision`` and ``hookSpecificOutput.*``, ``modifiedArgs`` and
``updatedInput`` alike (conventions.md §2). Plain text where the format ignores it is
ignored (`parse_answer`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from .names import Dialect, HookEvent

__all__ = [
    "CLAUDE_TOOLS",
    "COPILOT_TOOLS",
    "Answer",
    "Facts",
    "claude_tool_response",
    "from_claude_args",
    "parse_answer",
    "text_is_ignored",
    "to_claude",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class Facts:
    """What an event is about, dialect-neutral; `core.hooks.payloads.payload` renders it."""

    session_key: str
    """The session (for subagent events: the parent's; ``agent_id`` is the child's)."""
    cwd: str
    channel: str = ""
    agent_type: str = "main"
    depth: int = 0
    message_id: str = ""
    origin: str | None = None
    prompt: str | None = None
    """The user's message (sessionStart, userPromptSubmitted) or a subagent's task."""
    source: str | None = None
    """sessionStart: ``startup`` (a new session) or ``new`` (after ``/new``)."""
    model: str | None = None
    """sessionStart: the model answering (Claude's ``model``), when known."""
    tool_name: str | None = None
    tool_args: dict[str, Any] | None = None
    call_id: str | None = None
    tool_result: str | None = None
    """postToolUse: the result text; postToolUseFailure: the error text."""
    stop_reason: str | None = None
    """agentStop: ours (``answered``, ``task_complete``, ``max_iterations``)."""
    stop_hook_active: bool | None = None
    last_message: str | None = None
    reason: str | None = None
    """sessionEnd: why it ended, ours (``new``: ``/new``)."""
    error: str | None = None
    error_kind: str | None = None
    agent_id: str | None = None
    """subagent events: the child's session key."""
    transcript_path: str | None = None
    """The session's JSONL transcript (`core.hooks.transcript`), when one is kept."""
    agent_transcript_path: str | None = None
    """subagentStop: the child's transcript."""


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


def to_claude(tool: str, args: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """Our ``tool`` and its ``args`` as Claude Code names them."""
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


def claude_tool_response(tool: str, args: dict[str, Any] | None, result: str) -> Any:
    """``tool_response`` as Claude Code shapes it for the tools it shares with us
    (``Bash``: ``stdout``/``stderr``/``interrupted``/``isImage``; ``Write``/``Edit``:
    ``filePath``/``success``); other tools' result text as it is."""
    if tool == "exec":
        return {"stdout": result, "stderr": "", "interrupted": False, "isImage": False}
    if tool in ("write_file", "edit_file"):
        return {"filePath": str((args or {}).get("path", "")), "success": True}
    return result


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


_CONTEXT_FROM_TEXT = frozenset({HookEvent.SESSION_START, HookEvent.USER_PROMPT_SUBMITTED})
"""Claude Code: plain stdout of these events is context for the model."""
_COPILOT_DECISIONS = frozenset(
    {
        HookEvent.PRE_TOOL_USE,
        HookEvent.POST_TOOL_USE_FAILURE,
        HookEvent.AGENT_STOP,
        HookEvent.SUBAGENT_STOP,
    }
)
"""Copilot events whose output GitHub documents as processed (a decision); the output
of the others is ignored or at most an optional ``additionalContext`` object."""


def text_is_ignored(event: HookEvent, dialect: Dialect) -> bool:
    """Whether output that is not a JSON object means nothing for ``event`` (rather than
    a broken answer): Claude Code reads plain stdout only on SessionStart and
    UserPromptSubmit (as context) and logs it elsewhere; GitHub ignores the output of
    every Copilot event but the decision ones."""
    if dialect == "claude":
        return event not in _CONTEXT_FROM_TEXT
    return event not in _COPILOT_DECISIONS


def parse_answer(stdout: str, *, event: HookEvent, dialect: Dialect) -> Answer:
    """Read the decision a hook printed (exit code 0).

    Output that is not a JSON object is context for Claude-dialect sessionStart /
    userPromptSubmitted hooks (as in Claude Code) and nothing where the format ignores it
    (`text_is_ignored`).

    Raises:
        ValueError: the output of a decision event is not a JSON object.
    """
    try:
        doc = _json_object(stdout)
    except ValueError:
        if dialect == "claude" and event in _CONTEXT_FROM_TEXT:
            return Answer(context=stdout.strip())
        if text_is_ignored(event, dialect):
            return Answer()
        raise
    return _answer_of(doc, event)


def _answer_of(doc: dict[str, Any] | None, event: HookEvent) -> Answer:
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
    if isinstance(args, str):  # in the form toolArgs came in (a JSON string)
        try:
            args = json.loads(args)
        except json.JSONDecodeError as exc:
            raise ValueError("modifiedArgs is a string but not JSON") from exc
    if args is not None and not isinstance(args, dict):
        raise ValueError("modifiedArgs / updatedInput is not a JSON object")
    context = pick("additionalContext")
    return Answer(
        block=block,
        context=str(context) if context else None,
        args=args,
    )
