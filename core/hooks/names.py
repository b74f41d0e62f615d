"""Hook event names: the canonical (Copilot camelCase) ones, their aliases, and dialects."""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

__all__ = ["TOOL_ALIASES", "Dialect", "HookEvent", "dialect_of", "normalise_event"]

Dialect = Literal["copilot", "claude"]
"""How a hook's payload is written and its output read: ``copilot`` (camelCase, for
camelCase event names) or ``claude`` (snake_case with ``hook_event_name``, for
PascalCase event names), whatever file the entry came from."""


class HookEvent(StrEnum):
    """The lifecycle events familiar fires, by their Copilot CLI names."""

    SESSION_START = "sessionStart"
    SESSION_END = "sessionEnd"
    USER_PROMPT_SUBMITTED = "userPromptSubmitted"
    PRE_TOOL_USE = "preToolUse"
    POST_TOOL_USE = "postToolUse"
    POST_TOOL_USE_FAILURE = "postToolUseFailure"
    SUBAGENT_START = "subagentStart"
    SUBAGENT_STOP = "subagentStop"
    AGENT_STOP = "agentStop"
    ERROR_OCCURRED = "errorOccurred"


_ALIASES: dict[str, HookEvent] = {e.value.lower(): e for e in HookEvent}
_ALIASES.update(
    {
        "userpromptsubmit": HookEvent.USER_PROMPT_SUBMITTED,
        "stop": HookEvent.AGENT_STOP,
        "stopfailure": HookEvent.ERROR_OCCURRED,
    }
)

TOOL_ALIASES: dict[str, tuple[str, ...]] = {
    "exec": ("Bash", "bash", "shell", "execute"),
    "read_file": ("Read", "view", "read"),
    "write_file": ("Write", "create"),
    "edit_file": ("Edit", "edit"),
    "list_dir": ("LS", "Glob"),
    "sessions_spawn": ("Task", "Agent", "task", "agent"),
}
"""Other names a matcher may use for our tools (Claude Code's and Copilot's), so a
``"matcher": "Bash"`` written for Claude Code also guards ``exec``."""


def normalise_event(name: str) -> HookEvent | None:
    """The event ``name`` means (camelCase or PascalCase, case-insensitive), or None."""
    return _ALIASES.get(name.lower())


def dialect_of(name: str) -> Dialect:
    """``claude`` for a PascalCase event name (``PreToolUse``), else ``copilot``."""
    return "claude" if name[:1].isupper() else "copilot"
