"""In-process wake-ups so the single-process hot path never sleep-polls."""

from __future__ import annotations

import asyncio
import contextlib
from collections import defaultdict

__all__ = ["Signal", "SignalMap"]


class Signal:
    """A level-triggered wake-up: ``set`` wakes current and future waiters once."""

    def __init__(self) -> None:
        self._event = asyncio.Event()

    def set(self) -> None:
        self._event.set()

    async def wait(self, timeout: float) -> None:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await self._event.wait()
        self._event.clear()


class SignalMap:
    """One Signal per name (per channel)."""

    def __init__(self) -> None:
        self._signals: defaultdict[str, Signal] = defaultdict(Signal)

    def set(self, name: str) -> None:
        self._signals[name].set()

    async def wait(self, name: str, timeout: float) -> None:
        await self._signals[name].wait(timeout)
