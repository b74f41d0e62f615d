"""The bus protocols: a durable inbox, a durable outbox, and an in-process hub for ephemerals."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from core.messages import InboundMessage, OutboundMessage

__all__ = ["Claim", "DueReply", "Inbox", "Outbox", "Published"]


@dataclass(frozen=True, slots=True)
class Published:
    """The result of a publish: the message id and whether it was a duplicate."""

    message_id: str
    duplicate: bool = False


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


class Inbox(Protocol):
    """Durable inbound queue with per-session ordering and leases."""

    async def publish_inbound(self, message: InboundMessage) -> Published:
        """Commit ``message``; returns only once it is durable. Duplicates are dropped."""
        ...

    async def claim(self, *, owner: str, limit: int, lease_seconds: float) -> list[Claim]:
        """Lease up to ``limit`` messages: the oldest pending one of each idle session."""
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

    async def wait_inbound(self, timeout: float) -> None:
        """Return when something may be claimable, or after ``timeout`` seconds."""
        ...


class Outbox(Protocol):
    """Durable final replies awaiting delivery by their channel."""

    async def due_outbound(self, channel: str, *, limit: int) -> list[DueReply]:
        """Pending replies of ``channel`` whose next attempt is due."""
        ...

    async def mark_delivered(self, outbound_id: str) -> bool:
        """Record delivery; True only the first time (exactly-once marking)."""
        ...

    async def mark_failed(self, outbound_id: str, *, error: str, retry_in: float | None) -> None:
        """Record a failed attempt; ``retry_in`` None gives up."""
        ...

    async def wait_outbound(self, channel: str, timeout: float) -> None:
        """Return when ``channel`` may have a reply to deliver, or after ``timeout``."""
        ...
