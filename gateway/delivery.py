"""Each channel's DeliveryWorker, with its retry policy, and the replies given up on.

A reply whose delivery failed ``max_attempts`` times is marked failed in the outbox by
the worker; here it is also recorded as a ``delivery.failed`` event in its session's
log and counted for ``familiar status`` (``failed_deliveries`` per channel).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from channels.base import Channel, DeliveryPolicy, RetryingChannel
from core.bus.base import DueReply, Outbox
from core.bus.delivery import DeliveryWorker, Send
from core.event_data import DeliveryFailed
from core.events import Event, EventLog

__all__ = ["DeliveryFailures", "delivery_worker"]

log = logging.getLogger(__name__)

_REMEMBERED = 10_000
"""Due replies remembered (for their session) until their attempt is recorded."""


@dataclass
class DeliveryFailures:
    """Replies given up on: recorded in their session's event log, counted per channel."""

    events: EventLog
    counts: dict[str, int] = field(default_factory=dict)
    last: dict[str, dict[str, Any]] = field(default_factory=dict)

    def report(self, channel: str) -> dict[str, Any]:
        """``failed_deliveries`` (since the gateway started) and ``last_failed_delivery``."""
        return {
            "failed_deliveries": self.counts.get(channel, 0),
            "last_failed_delivery": self.last.get(channel),
        }

    async def record(self, channel: str, due: DueReply, error: str) -> None:
        reply = due.message
        attempts = due.failed_attempts + 1
        self.counts[channel] = self.counts.get(channel, 0) + 1
        self.last[channel] = {"reply_id": reply.id, "session": reply.session_key, "error": error}
        log.warning(
            "delivery given up channel=%s reply_id=%s attempts=%d error=%s",
            channel,
            reply.id,
            attempts,
            error,
        )
        data = DeliveryFailed(channel=channel, reply_id=reply.id, attempts=attempts, error=error)
        event = Event(session_key=reply.session_key, message_id=reply.inbound_id, data=data)
        try:
            await self.events.append(event)
        except Exception:
            log.exception("recording a failed delivery in the event log failed")


class _RecordingOutbox:
    """An `Outbox` that tells `DeliveryFailures` about each reply the worker gives up on."""

    def __init__(self, inner: Outbox, channel: str, failures: DeliveryFailures) -> None:
        self._inner = inner
        self._channel = channel
        self._failures = failures
        self._due: dict[str, DueReply] = {}

    async def due_outbound(
        self, channel: str, *, limit: int, lease_seconds: float | None = None
    ) -> list[DueReply]:
        due = await self._inner.due_outbound(channel, limit=limit, lease_seconds=lease_seconds)
        for reply in due:
            self._due[reply.message.id] = reply
        while len(self._due) > _REMEMBERED:
            del self._due[next(iter(self._due))]
        return due

    async def mark_delivered(self, outbound_id: str) -> bool:
        self._due.pop(outbound_id, None)
        return await self._inner.mark_delivered(outbound_id)

    async def release_outbound(self, outbound_ids: Sequence[str]) -> None:
        await self._inner.release_outbound(outbound_ids)

    async def release_dead_senders(self) -> int:
        return await self._inner.release_dead_senders()

    async def mark_failed(self, outbound_id: str, *, error: str, retry_in: float | None) -> None:
        due = self._due.pop(outbound_id, None)
        await self._inner.mark_failed(outbound_id, error=error, retry_in=retry_in)
        if retry_in is None and due is not None:
            await self._failures.record(self._channel, due, error)

    async def defer_outbound(self, outbound_id: str, *, reason: str, retry_in: float) -> None:
        self._due.pop(outbound_id, None)
        await self._inner.defer_outbound(outbound_id, reason=reason, retry_in=retry_in)

    async def wait_outbound(self, channel: str, timeout: float) -> None:
        await self._inner.wait_outbound(channel, timeout)


def delivery_worker(
    channel: Channel, *, bus: Outbox, send: Send, failures: DeliveryFailures
) -> DeliveryWorker:
    """The DeliveryWorker of ``channel``: its own `DeliveryPolicy` if it has one."""
    policy = channel.delivery_policy if isinstance(channel, RetryingChannel) else DeliveryPolicy()
    return DeliveryWorker(
        bus=_RecordingOutbox(bus, channel.name, failures),
        channel=channel.name,
        send=send,
        max_attempts=policy.max_attempts,
        base_backoff=policy.first_backoff,
        max_backoff=policy.max_backoff,
    )
