"""One background task a service owns: started once, cancelled and awaited on stop."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Coroutine
from typing import Any

__all__ = ["BackgroundTask"]


class BackgroundTask:
    """Holds at most one running task of a service's loop (a worker, a poller)."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._task: asyncio.Task[None] | None = None

    @property
    def running(self) -> bool:
        return self._task is not None

    def start(self, loop: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Run ``loop()`` as the task, unless it already runs."""
        if self._task is None:
            self._task = asyncio.create_task(loop(), name=self._name)

    async def stop(self) -> None:
        """Cancel the task and wait for it to end (a no-op when none runs)."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
