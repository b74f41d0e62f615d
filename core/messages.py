"""Typed, frozen messages that travel on the bus, and session key helpers."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue

__all__ = [
    "Attachment",
    "Delivery",
    "EphemeralMessage",
    "InboundMessage",
    "Origin",
    "OutboundKind",
    "OutboundMessage",
    "Progress",
    "ReplyFormat",
    "SessionKey",
    "StreamDelta",
    "new_message_id",
    "reply_id_for",
    "utcnow",
]

SessionKey = str
"""A conversation's name: ``cli:<name>``, ``slack:<team>:<channel>[:<ts>]``, ``teams:<id>``,
``webhook:<hook>:<session>``, ``subagent:<id>``."""

Origin = Literal["user", "schedule", "subagent", "system"]
OutboundKind = Literal["reply", "error"]
ReplyFormat = Literal["markdown", "text"]
"""How a reply's text is meant: ``markdown`` (the model's), or ``text`` shown as it is
(a slash command's output: its ``<placeholders>`` and line breaks are literal)."""


def utcnow() -> datetime:
    """Timezone-aware now in UTC."""
    return datetime.now(UTC)


def new_message_id() -> str:
    """A fresh, sortable-enough unique message id."""
    return uuid.uuid4().hex


def reply_id_for(inbound_id: str) -> str:
    """The id of the one final reply to an inbound message: redelivery reuses it."""
    return f"{inbound_id}.reply"


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Attachment(_Frozen):
    """A file or link that came with a message."""

    name: str
    url: str | None = None
    mime_type: str | None = None


class Delivery(_Frozen):
    """Where a reply goes: the channel and, inside it, the chat and thread."""

    channel: str
    chat_id: str = ""
    thread_id: str | None = None
    # Channel-specific routing data a channel needs to answer later (e.g. a Teams
    # conversation reference). Opaque to core.
    route: dict[str, str] = Field(default_factory=dict)


class InboundMessage(_Frozen):
    """A message for the agent, as a channel (or the scheduler) publishes it."""

    id: str = Field(default_factory=new_message_id)
    session_key: SessionKey
    text: str
    delivery: Delivery
    sender: str = ""
    approver: str | None = None
    """Who answers approvals with this message, as its channel authenticated them (a
    Slack or Teams user id, ``cli``, ``webhook:<hook>``; never a field a caller typed):
    recorded as ``decided_by``. None: ``/approve`` and ``/deny`` are refused here (a
    webhook hook without ``allow_approve``, a schedule, a hook)."""
    attachments: tuple[Attachment, ...] = ()
    origin: Origin = "user"
    event_id: str | None = None
    """Platform event id (or idempotency key); a second publish with it is dropped."""
    autopilot: bool = False
    schedule_id: int | None = None
    hook_stop_blocks: int = 0
    """For a message an ``agentStop`` hook enqueued: how many such blocks in a row led
    to it (capped by ``hooks.max_consecutive_blocks``); 0 for every other message."""
    metadata: dict[str, JsonValue] = Field(default_factory=dict)
    """Caller data stored with the message (a webhook's ``metadata``); core never reads it."""
    created_at: datetime = Field(default_factory=utcnow)


class OutboundMessage(_Frozen):
    """The durable final reply to one inbound message (exactly one per inbound id)."""

    id: str
    inbound_id: str
    session_key: SessionKey
    delivery: Delivery
    text: str
    kind: OutboundKind = "reply"
    format: ReplyFormat = "markdown"
    created_at: datetime = Field(default_factory=utcnow)

    @classmethod
    def answering(
        cls,
        message: InboundMessage,
        text: str,
        kind: OutboundKind = "reply",
        *,
        format: ReplyFormat = "markdown",
    ) -> OutboundMessage:
        """The final reply to ``message``: same session and delivery, its one reply id."""
        return cls(
            id=reply_id_for(message.id),
            inbound_id=message.id,
            session_key=message.session_key,
            delivery=message.delivery,
            text=text,
            kind=kind,
            format=format,
        )


class StreamDelta(_Frozen):
    """An ephemeral piece of a reply being generated."""

    type: Literal["delta"] = "delta"
    inbound_id: str
    session_key: SessionKey
    delivery: Delivery
    text: str


class Progress(_Frozen):
    """An ephemeral progress note (a tool started, a subagent finished...)."""

    type: Literal["progress"] = "progress"
    inbound_id: str
    session_key: SessionKey
    delivery: Delivery
    text: str


EphemeralMessage = Annotated[StreamDelta | Progress, Field(discriminator="type")]
