"""In-process wake-ups so the single-process hot path never sleep-polls."""

from __future__ import annotations

import asyncio
import contextlib
from collections import defaultdict
from typing import Generic, TypeVar

__all__ = ["KeyedWaiters", "Signal", "SignalMap"]

T = TypeVar("T")


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


class KeyedWaiters(Generic[T]):
    """Futures waiting on a key (a message id); ``wake`` resolves and forgets them.

    A wake may carry what the waiters wait for (a reply settled in this process), or
    None when they must look it up (a wake-up from another process).
    """

    def __init__(self) -> None:
        self._waiting: defaultdict[str, set[asyncio.Future[T | None]]] = defaultdict(set)

    def __len__(self) -> int:
        return len(self._waiting)

    def register(self, key: str) -> asyncio.Future[T | None]:
        """A future that ``wake(key)`` resolves; `discard` it when done waiting."""
        future: asyncio.Future[T | None] = asyncio.get_running_loop().create_future()
        self._waiting[key].add(future)
        return future

    def discard(self, key: str, future: asyncio.Future[T | None]) -> None:
        waiting = self._waiting.get(key)
        if waiting is not None:
            waiting.discard(future)
            if not waiting:
                del self._waiting[key]

    def wake(self, key: str, value: T | None = None) -> None:
        for future in self._waiting.pop(key, ()):
            if not future.done():
                future.set_result(value)
