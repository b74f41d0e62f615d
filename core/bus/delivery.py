"""Delivers durable final replies through their channel, with retries and backoff."""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable

from core.background import BackgroundTask
from core.bus.base import DueReply, Outbox
from core.errors import RetryLater
from core.logctx import log_context, redact
from core.messages import OutboundMessage

__all__ = ["DeliveryWorker"]

log = logging.getLogger(__name__)

Send = Callable[[OutboundMessage], Awaitable[None]]


class DeliveryWorker:
    """One per channel: waits for due replies, sends them, marks each delivered once.

    Replies are leased for ``lease_seconds`` while being sent, so two processes
    delivering the same channel (a restart overlapping, two hosts) never send one reply
    at the same time; a sender killed mid-send leaves it due again when the lease ends.
    """

    def __init__(
        self,
        *,
        bus: Outbox,
        channel: str,
        send: Send,
        max_attempts: int = 8,
        base_backoff: float = 1.0,
        max_backoff: float = 300.0,
        poll_interval: float = 1.0,
        lease_seconds: float = 120.0,
    ) -> None:
        self._bus = bus
        self._channel = channel
        self._send = send
        self._max_attempts = max_attempts
        self._base = base_backoff
        self._cap = max_backoff
        self._poll = poll_interval
        self._lease = lease_seconds
        self._worker = BackgroundTask(f"delivery-{channel}")
        self._held: set[str] = set()
        """Reply ids leased by this worker and not yet marked (given back at stop)."""

    def start(self) -> None:
        self._worker.start(self._loop)

    async def stop(self) -> None:
        await self._worker.stop()
        held, self._held = sorted(self._held), set()
        if held:  # a graceful stop: what was taken but not sent is due again at once
            try:
                await self._bus.release_outbound(held)
            except Exception:
                log.exception("giving back leased replies failed channel=%s", self._channel)

    async def _loop(self) -> None:
        while True:
            try:
                due = await self._bus.due_outbound(
                    self._channel, limit=100, lease_seconds=self._lease
                )
            except Exception:
                log.exception("reading due replies failed channel=%s", self._channel)
                due = []
            self._held.update(d.message.id for d in due)
            if due:
                # _deliver never raises for one reply's trouble, so one bad reply (or a
                # database hiccup while recording it) cannot end this loop.
                await asyncio.gather(*(self._deliver(d) for d in due))
                continue
            await self._bus.wait_outbound(self._channel, self._poll)

    async def _deliver(self, due: DueReply) -> None:
        await self._deliver_once(due)
        self._held.discard(due.message.id)

    async def _deliver_once(self, due: DueReply) -> None:
        message = due.message
        with log_context(session_key=message.session_key, message_id=message.inbound_id):
            try:
                await self._send(message)
            except asyncio.CancelledError:
                raise
            except RetryLater as exc:  # rate-limited: wait it out, no attempt used up
                await self._defer(due, exc)
                return
            except Exception as exc:
                await self._failed(due, redact(repr(exc)))
                return
            # Sent: never given back at stop (that would send it again), and the record
            # is finished even when a stop cancels us now.
            self._held.discard(message.id)
            try:
                if await asyncio.shield(self._bus.mark_delivered(message.id)):
                    log.info("delivered channel=%s kind=%s", self._channel, message.kind)
            except Exception:
                # Sent but not marked: it is sent again later (at least once).
                log.exception("recording a delivery failed channel=%s", self._channel)

    async def _defer(self, due: DueReply, exc: RetryLater) -> None:
        log.info(
            "delivery deferred channel=%s retry_after=%.1f reason=%s",
            self._channel,
            exc.retry_after,
            exc,
        )
        try:
            await self._bus.defer_outbound(
                due.message.id, reason=redact(str(exc)), retry_in=exc.retry_after
            )
        except Exception:
            log.exception("recording a deferred delivery failed channel=%s", self._channel)

    async def _failed(self, due: DueReply, error: str) -> None:
        attempt = due.failed_attempts + 1
        give_up = attempt >= self._max_attempts
        delay = min(self._cap, self._base * 2 ** (attempt - 1)) * random.uniform(0.8, 1.2)
        log.warning(
            "delivery failed channel=%s attempt=%d give_up=%s error=%s",
            self._channel,
            attempt,
            give_up,
            error,
        )
        try:
            await self._bus.mark_failed(
                due.message.id, error=error, retry_in=None if give_up else delay
            )
        except Exception:
            log.exception("recording a failed delivery failed channel=%s", self._channel)
