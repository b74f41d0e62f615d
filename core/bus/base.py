"""What the bus hands out and takes back: claims, due replies, statuses; and the `Outbox`.

The bus is the store's SQL queue, `core.bus.sql.SqlBus`, and its users type against
that class (see docs/design-notes.md, "The bus is the store's queue"). `Outbox` is the
one role with a second implementation (the gateway wraps it to record replies given
up on), so it stays a Protocol: what a `DeliveryWorker` needs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from core.messages import InboundMessage, OutboundMessage

__all__ = [
    "Claim",
    "DueReply",
    "MessageState",
    "MessageStatus",
    "OnceKey",
    "Outbox",
    "Published",
    "QueueCounts",
]

MessageState = Literal["pending", "claimed", "done", "failed"]
ONCE_PREFIX = "once:"
"""Starts the dedupe row of every one-time key (pruned by age, unlike the others)."""


@dataclass(frozen=True, slots=True)
class OnceKey:
    """A key a publish may take only once within ``seconds`` (a request signature).

    Attributes:
        key: unique per request (scoped to the channel by the bus).
        seconds: how long a second publish with it is refused; at least as long as the
            request it comes from stays acceptable.
    """

    key: str
    seconds: float

    def row_key(self, channel: str) -> str:
        return f"{ONCE_PREFIX}{channel}:{self.key}"


@dataclass(frozen=True, slots=True)
class Published:
    """The result of a publish: the message id and whether it was a duplicate.

    ``replayed``: refused because its one-time key was taken before (nothing stored);
    ``message_id`` is then the first publish's.
    """

    message_id: str
    duplicate: bool = False
    replayed: bool = False


@dataclass(frozen=True, slots=True)
class Claim:
    """A leased inbound message. ``attempt`` is 1 on first delivery."""

    message: InboundMessage
    attempt: int


@dataclass(frozen=True, slots=True)
class DueReply:
    """A reply due for delivery and how many attempts already failed."""

    message: OutboundMessage
    failed_attempts: int


@dataclass(frozen=True, slots=True)
class QueueCounts:
    """Inbound messages waiting (pending) and being worked on (claimed)."""

    pending: int = 0
    claimed: int = 0

    @property
    def depth(self) -> int:
        return self.pending + self.claimed


@dataclass(frozen=True, slots=True)
class MessageStatus:
    """Where an inbound message is, and its final reply once there is one."""

    message_id: str
    session: str
    status: MessageState
    reply: OutboundMessage | None = None

    def as_json(self) -> dict[str, Any]:
        reply = None
        if self.reply is not None:
            reply = {"kind": self.reply.kind, "text": self.reply.text}
        return {
            "message_id": self.message_id,
            "session": self.session,
            "status": self.status,
            "reply": reply,
        }


class Outbox(Protocol):
    """Durable final replies awaiting delivery by their channel."""

    async def due_outbound(
        self, channel: str, *, limit: int, lease_seconds: float | None = None
    ) -> list[DueReply]:
        """Pending replies of ``channel`` whose next attempt is due.

        With ``lease_seconds``, the replies returned are taken for that long: no other
        caller (in any process) gets them until the lease ends or they are marked.
        """
        ...

    async def mark_delivered(self, outbound_id: str) -> bool:
        """Record delivery; True only the first time (exactly-once marking)."""
        ...

    async def release_outbound(self, outbound_ids: Sequence[str]) -> None:
        """Give back leases this process holds and will not use (a stopping worker):
        those replies are due again at once."""
        ...

    async def release_dead_senders(self) -> int:
        """Make replies leased by dead processes on this host due again at once."""
        ...

    async def mark_failed(self, outbound_id: str, *, error: str, retry_in: float | None) -> None:
        """Record a failed attempt; ``retry_in`` None gives up."""
        ...

    async def defer_outbound(self, outbound_id: str, *, reason: str, retry_in: float) -> None:
        """Make a reply due again in ``retry_in`` seconds without counting a failed
        attempt (the platform asked us to wait); ``reason`` is kept as its last error."""
        ...

    async def wait_outbound(self, channel: str, timeout: float) -> None:
        """Return when ``channel`` may have a reply to deliver, or after ``timeout``."""
        ...
