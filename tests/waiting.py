"""Waiting for a condition in tests: poll it until a deadline, then fail loudly."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

__all__ = ["eventually", "eventually_sync", "started"]

T = TypeVar("T")

Predicate = Callable[[], bool | Awaitable[bool]]


async def eventually(
    predicate: Predicate, *, timeout: float = 30.0, interval: float = 0.02, what: str = ""
) -> None:
    """Return once ``predicate()`` (sync or async) is true; fail the test after ``timeout``.

    Use it for conditions nothing signals (a row in a database, a process gone); when
    the code under test can set an event, await that instead.
    """
    deadline = time.monotonic() + timeout
    while True:
        result = predicate()
        if inspect.isawaitable(result):
            result = await result
        if result:
            return
        if time.monotonic() >= deadline:
            raise AssertionError(f"not true within {timeout:g} s: {what or predicate!r}")
        await asyncio.sleep(interval)


def eventually_sync(
    predicate: Callable[[], bool], *, timeout: float = 30.0, interval: float = 0.1, what: str = ""
) -> None:
    """:func:`eventually` for synchronous tests (e2e tests that drive processes)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() >= deadline:
            raise AssertionError(f"not true within {timeout:g} s: {what or predicate!r}")
        time.sleep(interval)


def started(coro: Coroutine[Any, Any, T]) -> Awaitable[asyncio.Task[T]]:
    """Run ``coro`` as a task up to its first suspension, then hand the task back.

    Not a timing guess: asyncio runs ready callbacks in FIFO order, so one trip through
    the loop lets the new task run its first step (e.g. register itself as a waiter)
    before the caller goes on.
    """

    async def run() -> asyncio.Task[T]:
        task = asyncio.ensure_future(coro)
        await asyncio.sleep(0)
        return task

    return run()
