"""Runs one channel: starts it, retries a failed start with backoff, delivers while up.

A channel that cannot start (its platform unreachable, a token refused) is not a
config error: it is reported ``failed`` (``/readyz``, ``familiar status``, ``doctor``)
while the rest of the gateway serves, and its ``start`` is retried after 1 s, 2 s,
4 s ... up to 5 min (with jitter) until it runs. Its replies stay in the durable
outbox meanwhile: the DeliveryWorker only runs while the channel is up.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Callable
from typing import Any, Literal

from channels.base import Channel, ChannelContext
from core.bus.delivery import DeliveryWorker
from core.logctx import redact

__all__ = ["ChannelState", "ChannelSupervisor"]

log = logging.getLogger(__name__)

ChannelState = Literal["starting", "running", "failed", "stopped"]


class ChannelSupervisor:
    """Owns one channel's lifecycle and its DeliveryWorker.

    Args:
        channel: the channel (not started).
        context: what it is started with (the same on every attempt).
        worker: builds the channel's DeliveryWorker once it runs.
        first_retry: seconds before the first retry; doubles per failure.
        max_retry: the longest wait between attempts.
        start_timeout: an attempt that takes longer fails (and is retried).
    """

    def __init__(
        self,
        channel: Channel,
        *,
        context: ChannelContext,
        worker: Callable[[Channel], DeliveryWorker],
        first_retry: float = 1.0,
        max_retry: float = 300.0,
        start_timeout: float = 30.0,
    ) -> None:
        self.channel = channel
        self.name = channel.name
        self._context = context
        self._make_worker = worker
        self._first_retry = first_retry
        self._max_retry = max_retry
        self._start_timeout = start_timeout
        self.state: ChannelState = "starting"
        self.error: str | None = None
        """Why the last start failed (secrets redacted); None once it runs."""
        self.restarts = 0
        """How many times ``start`` was retried after a failure."""
        self._worker: DeliveryWorker | None = None
        self._retry: asyncio.Task[None] | None = None
        self._next_attempt: float | None = None

    @property
    def running(self) -> bool:
        return self.state == "running"

    @property
    def retry_in(self) -> float | None:
        """Seconds until the next attempt (None unless one is scheduled)."""
        if self._next_attempt is None:
            return None
        return max(0.0, round(self._next_attempt - time.monotonic(), 1))

    async def start(self) -> None:
        """Try once now; on failure keep retrying in the background. Never raises."""
        if not await self._attempt():
            self._retry = asyncio.create_task(self._retry_loop(), name=f"restart-{self.name}")

    async def stop_retrying(self) -> None:
        """No more attempts (the gateway is stopping)."""
        if self._retry is not None:
            self._retry.cancel()
            await asyncio.gather(self._retry, return_exceptions=True)
            self._retry = None
        self._next_attempt = None

    async def stop(self) -> None:
        """Stop retrying, stop delivering, stop the channel if it runs."""
        await self.stop_retrying()
        if self._worker is not None:
            await self._worker.stop()
            self._worker = None
        if self.state == "running":
            try:
                await self.channel.stop()
            except Exception:
                log.exception("channel %s failed to stop", self.name)
        self.state = "stopped"

    def as_json(self) -> dict[str, Any]:
        """``name``, ``state``, ``error``, ``retry_in`` and ``restarts``."""
        return {
            "name": self.name,
            "state": self.state,
            "error": self.error,
            "retry_in": self.retry_in,
            "restarts": self.restarts,
        }

    def not_ready(self) -> str | None:
        """Why this channel makes the gateway not ready (None when it runs)."""
        if self.state == "failed":
            return f"channel {self.name} failed: {self.error}"
        return None if self.running else f"channel {self.name} {self.state}"

    async def _attempt(self) -> bool:
        self.state = "starting"
        try:
            async with asyncio.timeout(self._start_timeout):
                await self.channel.start(self._context)
        except Exception as exc:
            self.error = _reason(exc, self._start_timeout)
            self.state = "failed"
            log.warning("channel %s failed to start: %s", self.name, self.error)
            with contextlib.suppress(Exception):
                await self.channel.stop()  # release what a half-done start holds
            return False
        self.state, self.error = "running", None
        self._worker = self._make_worker(self.channel)
        self._worker.start()
        log.info("channel %s started", self.name)
        return True

    async def _retry_loop(self) -> None:
        delay = self._first_retry
        while True:
            wait = delay * random.uniform(0.5, 1.0)  # jitter: channels do not retry in step
            self._next_attempt = time.monotonic() + wait
            log.info("channel %s: next start attempt in %.1fs", self.name, wait)
            await asyncio.sleep(wait)
            self._next_attempt = None
            self.restarts += 1
            if await self._attempt():
                return
            delay = min(delay * 2, self._max_retry)


def _reason(exc: Exception, timeout: float) -> str:
    if isinstance(exc, TimeoutError) and not str(exc):
        return f"start took longer than {timeout:g}s"
    return redact(str(exc) or type(exc).__name__)
