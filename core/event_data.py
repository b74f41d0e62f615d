"""Typed event payloads: one frozen class per public event type, and their wire names.

The names (``EventType``) are public: hooks, scripts and ``familiar sessions show
--events`` rely on them. Payloads are stored as JSON objects of their fields (fields
that are None are left out) and read back into the same classes; a type this version
does not know (written by a newer one) reads back as `UnknownEvent`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, ClassVar

__all__ = [
    "ApprovalDecided",
    "ApprovalRequested",
    "AssistantMessage",
    "Compaction",
    "DeliveryFailed",
    "EventPayload",
    "EventType",
    "HookBlocked",
    "HookError",
    "Idle",
    "McpSampling",
    "MemoryConsolidated",
    "ModeChanged",
    "OrchestrationStarted",
    "ScheduleCancelled",
    "ScheduleCreated",
    "ScheduleFired",
    "ScheduleMissed",
    "SessionError",
    "SubagentCompleted",
    "SubagentFailed",
    "SubagentStarted",
    "TaskComplete",
    "TodoUpdated",
    "ToolComplete",
    "ToolStart",
    "TurnEnd",
    "TurnStart",
    "UnknownEvent",
    "UserMessage",
    "payload_of",
    "type_of",
]


class EventType(StrEnum):
    """Public event type names."""

    USER_MESSAGE = "user.message"
    TURN_START = "assistant.turn_start"
    ASSISTANT_MESSAGE = "assistant.message"
    TURN_END = "assistant.turn_end"
    TOOL_START = "tool.execution_start"
    TOOL_COMPLETE = "tool.execution_complete"
    IDLE = "session.idle"
    TASK_COMPLETE = "session.task_complete"
    ERROR = "session.error"
    SCHEDULE_CREATED = "session.schedule_created"
    SCHEDULE_CANCELLED = "session.schedule_cancelled"
    SCHEDULE_FIRED = "session.schedule_fired"
    SCHEDULE_MISSED = "session.schedule_missed"
    SUBAGENT_STARTED = "subagent.started"
    SUBAGENT_COMPLETED = "subagent.completed"
    SUBAGENT_FAILED = "subagent.failed"
    MCP_SAMPLING = "mcp.sampling"
    HOOK_BLOCKED = "hook.blocked"
    HOOK_ERROR = "hook.error"
    APPROVAL_REQUESTED = "tool.approval_requested"
    APPROVAL_DECIDED = "tool.approval_decided"
    DELIVERY_FAILED = "delivery.failed"
    COMPACTION = "session.compaction"
    MODE_CHANGED = "session.mode_changed"
    ORCHESTRATION_STARTED = "orchestration.started"
    TODO_UPDATED = "todo.updated"
    MEMORY_CONSOLIDATED = "memory.consolidated"


@dataclass(frozen=True, slots=True, kw_only=True)
class UserMessage:
    """A message entered the session (from a user, a schedule, a subagent or the system)."""

    type: ClassVar[EventType] = EventType.USER_MESSAGE
    text: str
    origin: str
    sender: str | None = None
    attempt: int | None = None
    """Set on redelivery (2 = the second attempt)."""
    schedule_id: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnStart:
    """One LLM call begins (their number equals the number of LLM calls)."""

    type: ClassVar[EventType] = EventType.TURN_START
    iteration: int


@dataclass(frozen=True, slots=True, kw_only=True)
class AssistantMessage:
    """What the model answered in one LLM call."""

    type: ClassVar[EventType] = EventType.ASSISTANT_MESSAGE
    content: str
    tool_calls: list[str] = field(default_factory=list)
    usage: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnEnd:
    """One LLM call and the tools it requested are done."""

    type: ClassVar[EventType] = EventType.TURN_END
    iteration: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolStart:
    """A tool call starts."""

    type: ClassVar[EventType] = EventType.TOOL_START
    tool: str
    call_id: str
    arguments: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolComplete:
    """A tool call finished (``result`` is a preview of what the model saw)."""

    type: ClassVar[EventType] = EventType.TOOL_COMPLETE
    tool: str
    call_id: str
    is_error: bool
    result: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Idle:
    """The message is processed; closes every processed message."""

    type: ClassVar[EventType] = EventType.IDLE
    llm_calls: int | None = None
    stop: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskComplete:
    """The model called ``task_complete``."""

    type: ClassVar[EventType] = EventType.TASK_COMPLETE
    summary: str


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionError:
    """Something failed; ``kind`` names the error class (``TurnCancelled``, ``GaveUp``...)."""

    type: ClassVar[EventType] = EventType.ERROR
    error: str
    kind: str | None = None
    schedule_id: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class _ScheduleData:
    schedule_id: int
    kind: str
    spec: str
    timezone: str
    prompt: str
    status: str
    run_count: int = 0
    next_run: str | None = None
    last_run: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ScheduleCreated(_ScheduleData):
    type: ClassVar[EventType] = EventType.SCHEDULE_CREATED


@dataclass(frozen=True, slots=True, kw_only=True)
class ScheduleCancelled(_ScheduleData):
    type: ClassVar[EventType] = EventType.SCHEDULE_CANCELLED


@dataclass(frozen=True, slots=True, kw_only=True)
class ScheduleFired:
    """A schedule published its prompt (``late_s`` and ``coalesced_runs`` after downtime)."""

    type: ClassVar[EventType] = EventType.SCHEDULE_FIRED
    schedule_id: int
    firing_id: str
    due: str
    next_run: str | None = None
    late_s: float | None = None
    coalesced_runs: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ScheduleMissed:
    """A run was skipped, and why."""

    type: ClassVar[EventType] = EventType.SCHEDULE_MISSED
    schedule_id: int
    due: str
    reason: str
    skipped_runs: int = 1
    next_run: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalRequested:
    """An ``exec`` command waits for the user's ``/approve`` or ``/deny``."""

    type: ClassVar[EventType] = EventType.APPROVAL_REQUESTED
    approval_id: str
    command: str
    reason: str
    expires_at: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalDecided:
    """An approval was answered (``approved``, ``denied``) or ran out (``expired``)."""

    type: ClassVar[EventType] = EventType.APPROVAL_DECIDED
    approval_id: str
    command: str
    reason: str
    decision: str
    decided_by: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class DeliveryFailed:
    """A final reply could not be delivered by its channel and is given up on (e.g. a
    webhook callback that never succeeded); ``error`` is the last attempt's."""

    type: ClassVar[EventType] = EventType.DELIVERY_FAILED
    channel: str
    reply_id: str
    attempts: int
    error: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Compaction:
    """History outside the window was folded into the session's summary.

    ``method`` is ``model`` (the provider wrote it) or ``extractive`` (the fallback,
    ``error`` says why); ``messages`` were folded, up to history row ``upto``.
    """

    type: ClassVar[EventType] = EventType.COMPACTION
    method: str
    messages: int
    upto: int
    summary_chars: int
    duration_s: float | None = None
    error: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class HookBlocked:
    """A hook denied a tool call or blocked a prompt or a stop (``hook`` names the event:
    ``preToolUse``, ``userPromptSubmitted``, ``agentStop``...; ``source`` the hook file)."""

    type: ClassVar[EventType] = EventType.HOOK_BLOCKED
    hook: str
    reason: str
    source: str
    tool: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class HookError:
    """A hook crashed, timed out or answered nonsense (it failed open, except a
    ``preToolUse`` hook, whose call was refused: see the ``hook.blocked`` beside it)."""

    type: ClassVar[EventType] = EventType.HOOK_ERROR
    hook: str
    error: str
    source: str
    tool: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class McpSampling:
    """An MCP server asked familiar's model during a call of this session
    (``sampling/createMessage``): what it asked for and what it cost, or why it was
    refused (``refused``)."""

    type: ClassVar[EventType] = EventType.MCP_SAMPLING
    server: str
    messages: int
    max_tokens: int
    model: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    refused: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class SubagentStarted:
    """A subagent was started by this session (``mode`` sync or background)."""

    type: ClassVar[EventType] = EventType.SUBAGENT_STARTED
    agent_id: str
    agent_type: str
    mode: str
    memory_share_mode: str
    depth: int
    description: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class SubagentCompleted:
    """A subagent of this session answered (``status`` completed, or idle when it is a
    multi-turn agent waiting for more); ``result`` is the start of its answer."""

    type: ClassVar[EventType] = EventType.SUBAGENT_COMPLETED
    agent_id: str
    agent_type: str
    status: str
    result: str


@dataclass(frozen=True, slots=True, kw_only=True)
class SubagentFailed:
    """A subagent of this session failed or was cancelled (``status``)."""

    type: ClassVar[EventType] = EventType.SUBAGENT_FAILED
    agent_id: str
    agent_type: str
    status: str
    error: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ModeChanged:
    """A session's standing mode changed (``/autopilot on|off``)."""

    type: ClassVar[EventType] = EventType.MODE_CHANGED
    mode: str
    enabled: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class OrchestrationStarted:
    """An orchestration command (``/review``, ``/research``, ``/fleet``) began its run."""

    type: ClassVar[EventType] = EventType.ORCHESTRATION_STARTED
    command: str
    argument: str = ""
    tools: list[str] | None = None
    """The only tools the main agent may use while it runs (None: its usual ones)."""
    report: str | None = None
    """Where the run writes its report (``/research``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TodoUpdated:
    """A todo was added or changed status (``todo`` tool, ``/fleet``)."""

    type: ClassVar[EventType] = EventType.TODO_UPDATED
    todo_id: str
    status: str
    title: str | None = None
    agent_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryConsolidated:
    """rem-agent changed a session's memory: merged, dropped or added entries."""

    type: ClassVar[EventType] = EventType.MEMORY_CONSOLIDATED
    action: str
    scope: str
    removed: list[int] = field(default_factory=list)
    added: int | None = None
    reason: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class UnknownEvent:
    """An event of a type this version does not know, kept as read."""

    name: str
    fields: dict[str, Any] = field(default_factory=dict)


EventPayload = (
    UserMessage
    | TurnStart
    | AssistantMessage
    | TurnEnd
    | ToolStart
    | ToolComplete
    | Idle
    | TaskComplete
    | SessionError
    | ScheduleCreated
    | ScheduleCancelled
    | ScheduleFired
    | ScheduleMissed
    | ApprovalRequested
    | ApprovalDecided
    | DeliveryFailed
    | Compaction
    | HookBlocked
    | HookError
    | McpSampling
    | SubagentStarted
    | SubagentCompleted
    | SubagentFailed
    | ModeChanged
    | OrchestrationStarted
    | TodoUpdated
    | MemoryConsolidated
    | UnknownEvent
)

_KNOWN: dict[str, type[Any]] = {
    cls.type.value: cls
    for cls in (
        UserMessage,
        TurnStart,
        AssistantMessage,
        TurnEnd,
        ToolStart,
        ToolComplete,
        Idle,
        TaskComplete,
        SessionError,
        ScheduleCreated,
        ScheduleCancelled,
        ScheduleFired,
        ScheduleMissed,
        ApprovalRequested,
        ApprovalDecided,
        DeliveryFailed,
        Compaction,
        HookBlocked,
        HookError,
        McpSampling,
        SubagentStarted,
        SubagentCompleted,
        SubagentFailed,
        ModeChanged,
        OrchestrationStarted,
        TodoUpdated,
        MemoryConsolidated,
    )
}


def type_of(payload: EventPayload) -> str:
    """The public type name of ``payload``."""
    if isinstance(payload, UnknownEvent):
        return payload.name
    return payload.type.value


def fields_of(payload: EventPayload) -> dict[str, Any]:
    """The JSON object stored for ``payload`` (None fields left out)."""
    if isinstance(payload, UnknownEvent):
        return dict(payload.fields)
    return {
        f.name: value
        for f in dataclasses.fields(payload)
        if (value := getattr(payload, f.name)) is not None
    }


def payload_of(type_name: str, data: dict[str, Any]) -> EventPayload:
    """Read a stored payload back into its class (`UnknownEvent` if it does not fit)."""
    cls = _KNOWN.get(type_name)
    if cls is None:
        return UnknownEvent(name=type_name, fields=data)
    names = {f.name for f in dataclasses.fields(cls)}
    try:
        payload: EventPayload = cls(**{k: v for k, v in data.items() if k in names})
    except TypeError:  # a required field is missing: written by another version
        return UnknownEvent(name=type_name, fields=data)
    return payload
