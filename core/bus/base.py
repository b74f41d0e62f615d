"""The bus protocols core depends on: publish, inbox, outbox, lookups and reply waiting.

Each consumer takes the narrowest one it needs: a channel or the scheduler only
publishes (`Publisher`), the agent runtime works the `Inbox`, a `DeliveryWorker` the
`Outbox`, status pages and waiters use `MessageLookup` and `ReplyWaiter`. `Bus` is all
of them, for the composition root. `core.bus.sql.SqlBus` implements `Bus`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from sqlalchemy import Connection

from core.messages import Delivery, InboundMessage, OutboundMessage

__all__ = [
    "Bus",
    "ChannelBus",
    "Claim",
    "DueReply",
    "Inbox",
    "MessageLookup",
    "MessageState",
    "MessageStatus",
    "OnceKey",
    "OutboundPublisher",
    "Outbox",
    "Published",
    "Publisher",
    "QueueCounts",
    "ReplyWaiter",
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


class Publisher(Protocol):
    """What a channel, the scheduler or the heartbeat needs: durable publishing."""

    async def publish_inbound(
        self, message: InboundMessage, *, once: OnceKey | None = None
    ) -> Published:
        """Commit ``message``; returns only once it is durable. Duplicates are dropped.

        A message whose ``event_id`` was already published on its channel within the
        dedupe window is not stored again: the first message id comes back with
        ``duplicate=True``. With ``once``, a key already taken on the channel within
        ``once.seconds`` (by any process on the database) refuses the publish:
        ``replayed=True``, nothing stored.
        """
        ...


class Inbox(Publisher, Protocol):
    """Durable inbound queue with per-session ordering and leases (the agent runtime's)."""

    async def claim(self, *, owner: str, limit: int, lease_seconds: float) -> list[Claim]:
        """Lease up to ``limit`` messages: the oldest pending one of each idle session
        that has no suspect (a message whose last attempt was interrupted)."""
        ...

    async def suspect_waiting(self) -> bool:
        """Whether a suspect is claimable now."""
        ...

    async def claim_suspect(self, *, owner: str, lease_seconds: float) -> Claim | None:
        """Lease one suspect, to run alone (`core.bus.suspects`)."""
        ...

    def settle_in(
        self,
        conn: Connection,
        message_id: str,
        *,
        owner: str,
        reply: OutboundMessage | None,
        failed: bool = False,
    ) -> bool:
        """The settle write inside a caller's transaction job; call `notify_reply` after.

        Returns False (and stores no reply) when ``owner`` no longer holds the claim.
        """
        ...

    def notify_reply(self, reply: OutboundMessage | None) -> None:
        """Wake the reply's channel and its waiters (after the settling commit)."""
        ...

    async def settle(
        self, message_id: str, *, owner: str, reply: OutboundMessage | None, failed: bool = False
    ) -> bool:
        """Finish a claim; the reply (if any) is stored once per reply id. False if lost."""
        ...

    async def renew(
        self, message_ids: Sequence[str], *, owner: str, lease_seconds: float
    ) -> set[str]:
        """Extend the leases of messages still being worked on; returns those still held."""
        ...

    async def release(self, message_ids: Sequence[str], *, owner: str) -> None:
        """Give claimed messages back (graceful shutdown): claimable again at once."""
        ...

    async def release_dead_owners(self) -> int:
        """Make messages leased by dead processes on this host claimable at once."""
        ...

    async def wait_inbound(self, timeout: float) -> None:
        """Return when something may be claimable, or after ``timeout`` seconds."""
        ...


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


class OutboundPublisher(Protocol):
    """Queueing a reply for another channel's delivery (a process that does not run it)."""

    async def publish_outbound(self, message: OutboundMessage) -> bool:
        """Store ``message`` for delivery by its channel; False if its id was stored already."""
        ...


class MessageLookup(Protocol):
    """Read-only questions about inbound messages (the only way to ask them)."""

    async def message_status(self, message_id: str) -> MessageStatus | None:
        """The status of inbound ``message_id`` and its final reply; None when unknown."""
        ...

    async def message_states(self, message_ids: Sequence[str]) -> dict[str, MessageState]:
        """The state of each known id among ``message_ids`` (unknown ids are absent)."""
        ...

    async def last_user_delivery(self, session_key: str) -> Delivery | None:
        """Where the newest user message of ``session_key`` came from, if any."""
        ...

    async def queue_counts(self, session_key: str | None = None) -> QueueCounts:
        """Pending and claimed messages, of one session or of all."""
        ...

    async def queued_by_session(self, session_keys: Sequence[str]) -> dict[str, int]:
        """Pending + claimed messages per session, for the given sessions (absent: 0)."""
        ...

    async def newest_seq(self) -> int:
        """The newest inbound sequence number (0 when none)."""
        ...

    async def channels_after(self, seq: int, *, limit: int) -> list[tuple[int, str]]:
        """``(seq, channel)`` of messages published after ``seq``, oldest first."""
        ...


class ReplyWaiter(Protocol):
    """Waiting for the final reply of one message: for any channel, or a subagent's parent."""

    async def wait_reply(self, message_id: str, timeout: float | None) -> OutboundMessage | None:
        """The final reply to ``message_id`` once it is settled, or None after ``timeout``.

        Works for replies settled by any process sharing the database (in-process settles
        wake the waiter at once; others are seen by polling). None ``timeout`` waits
        without a limit.
        """
        ...


class ChannelBus(Publisher, MessageLookup, ReplyWaiter, Protocol):
    """What a channel may do with the bus: publish, look up, wait for replies."""


class Bus(Inbox, Outbox, OutboundPublisher, MessageLookup, ReplyWaiter, Protocol):
    """Every bus role at once: what the composition root builds and hands out narrowly."""
