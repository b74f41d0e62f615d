"""The ``subagent_tasks`` table and the TaskRecord read from it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from sqlalchemy import Index, Text
from sqlmodel import Column, Field, SQLModel

from core.event_data import SubagentStarted
from core.events import Event

__all__ = [
    "ACTIVE",
    "MCP_TASK",
    "MCP_TASK_NO_MESSAGES",
    "PEER_PREFIX",
    "TaskMode",
    "TaskRecord",
    "TaskRow",
    "TaskStatus",
    "no_messages",
    "runs_elsewhere",
]

TaskStatus = Literal["running", "idle", "completed", "failed", "cancelled"]
TaskMode = Literal["sync", "background"]
ACTIVE: tuple[str, ...] = ("running", "idle")
"""Statuses of agents that may still answer (and can be cancelled)."""
MCP_TASK = "mcp-task"
"""The agent type of a tool call an MCP server runs as a task (`core.mcp.bridge`): its
server works on it; it takes no messages and holds no subagent slot (its poller sees
it cancelled and cancels it on its server)."""
MCP_TASK_NO_MESSAGES = (
    "{id} is an MCP task ({what}): its server works on the arguments it was started "
    "with and takes no messages; call the tool again to start a new task"
)
PEER_PREFIX = "peer:"
"""Starts the agent type of a task delegated to a group peer (``peer:<name>``): that
assistant works on it, so like an MCP task it takes no messages and holds no slot."""


def runs_elsewhere(agent_type: str) -> bool:
    """Whether a record's work runs outside this assistant's bus (an MCP task, a peer's)."""
    return agent_type == MCP_TASK or agent_type.startswith(PEER_PREFIX)


def no_messages(task_id: str, agent_type: str, description: str) -> str:
    """Why a record whose work runs elsewhere takes no ``subagents send``."""
    if agent_type == MCP_TASK:
        return MCP_TASK_NO_MESSAGES.format(id=task_id, what=description)
    return (
        f"{task_id} is a task of the group peer {agent_type.removeprefix(PEER_PREFIX)!r}: "
        "it works on the prompt it was given and takes no messages; spawn a new one"
    )


class TaskRow(SQLModel, table=True):
    """One subagent: who started it, what it does, where it is. Its turns live in the
    child's own session ``subagent:<id>``."""

    __tablename__ = "subagent_tasks"
    __table_args__ = (
        Index("ix_subagent_tasks_owner", "owner_key", "created_at"),
        Index("ix_subagent_tasks_status", "status"),
        Index("ix_subagent_tasks_spawn_key", "spawn_key"),
    )

    id: str = Field(primary_key=True, max_length=32)
    owner_key: str = Field(max_length=512)
    """The parent's session key."""
    child_key: str = Field(max_length=512)
    spawn_key: str | None = Field(default=None, max_length=200)
    """The parent message and call that spawned it: a rerun of that message after a
    crash finds this agent again instead of starting a second one."""
    agent_type: str = Field(max_length=128)
    name: str | None = Field(default=None, max_length=128)
    description: str = Field(default="", sa_column=Column(Text, nullable=False))
    prompt: str = Field(sa_column=Column(Text, nullable=False))
    model: str | None = Field(default=None, max_length=200)
    mode: str = Field(max_length=16)
    multi_turn: bool = False
    memory_mode: str = Field(max_length=32)
    status: str = Field(max_length=16)
    result: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    error: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    turns: int = 0
    tool_calls: int = 0
    last_intent: str | None = Field(default=None, max_length=256)
    depth: int = 1
    delivery: str = Field(sa_column=Column(Text, nullable=False))
    """JSON of the parent's Delivery: where a handoff (and the parent's answer) goes."""
    snapshot: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    """inherit-readonly: the parent's recent context, taken when the agent started."""
    message_id: str | None = Field(default=None, max_length=64)
    """The child's newest work message (its answer settles the current run)."""
    handoff: bool = False
    """Whether the answer to ``message_id`` is handed to the parent as a new message."""
    created_at: float
    updated_at: float
    finished_at: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskRecord:
    """A subagent as the registry, the tools and the CLI see it."""

    id: str
    owner_key: str
    child_key: str
    agent_type: str
    name: str | None
    description: str
    prompt: str
    model: str | None
    mode: TaskMode
    multi_turn: bool
    memory_mode: str
    status: TaskStatus
    result: str | None
    error: str | None
    turns: int
    tool_calls: int
    last_intent: str | None
    depth: int
    delivery: str
    snapshot: str | None
    message_id: str | None
    handoff: bool
    spawn_key: str | None
    created_at: float
    updated_at: float
    finished_at: float | None

    @classmethod
    def of(cls, row: Any) -> TaskRecord:
        names = cls.__dataclass_fields__
        return cls(**{n: getattr(row, n) for n in names})

    @property
    def active(self) -> bool:
        return self.status in ACTIVE

    def as_json(self, *, full: bool = False) -> dict[str, Any]:
        found: dict[str, Any] = {
            "id": self.id,
            "owner": self.owner_key,
            "session": self.child_key,
            "agent_type": self.agent_type,
            "name": self.name,
            "description": self.description,
            "mode": self.mode,
            "multi_turn": self.multi_turn,
            "memory_share_mode": self.memory_mode,
            "status": self.status,
            "depth": self.depth,
            "model": self.model,
            "progress": {
                "turns": self.turns,
                "tool_calls": self.tool_calls,
                "last_intent": self.last_intent,
            },
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "finished_at": self.finished_at,
        }
        if full:
            found["prompt"] = self.prompt
            found["result"] = self.result
            found["error"] = self.error
        return found


def started_event(
    session_key: str,
    message_id: str | None,
    *,
    agent_id: str,
    agent_type: str,
    mode: str,
    depth: int,
    description: str | None,
    memory_share_mode: str = "handoff",
) -> Event:
    """The ``subagent.started`` event a spawn records in the calling session's log (a
    subagent's, an MCP task's or a group peer's)."""
    started = SubagentStarted(
        agent_id=agent_id,
        agent_type=agent_type,
        mode=mode,
        memory_share_mode=memory_share_mode,
        depth=depth,
        description=description,
    )
    return Event(session_key=session_key, message_id=message_id, data=started)


def outside_task_values(
    *,
    task_id: str,
    owner_key: str,
    child_key: str,
    spawn_key: str | None,
    agent_type: str,
    description: str,
    prompt: str,
    mode: str,
    depth: int,
    delivery: str,
    now: float,
) -> dict[str, Any]:
    """The ``subagent_tasks`` row of work that runs outside this assistant's agents (an
    MCP task, a group peer's task): one turn, no model, its answer handed back."""
    return {
        "id": task_id,
        "owner_key": owner_key,
        "child_key": child_key,
        "spawn_key": spawn_key,
        "agent_type": agent_type,
        "name": None,
        "description": description,
        "prompt": prompt,
        "model": None,
        "mode": mode,
        "multi_turn": False,
        "memory_mode": "handoff",
        "status": "running",
        "turns": 0,
        "tool_calls": 0,
        "depth": depth,
        "delivery": delivery,
        "message_id": None,
        "handoff": mode == "background",
        "created_at": now,
        "updated_at": now,
    }
