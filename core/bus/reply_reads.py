"""Reading stored replies for many waiters at once.

A process waiting on a thousand replies (the control socket under load) is woken by a
burst of ``reply`` notes; read one by one, that is a thousand store round trips. Here
every read asked for while another is running waits for the next one, which fetches
all of them in one query (the way the SQLite writer group-commits).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

from core.messages import OutboundMessage

__all__ = ["Fetch", "ReplyReads"]

Fetch = Callable[[Sequence[str]], Awaitable[dict[str, OutboundMessage]]]
"""Inbound message ids -> the stored final reply of each that has one."""


class ReplyReads:
    """Coalesces reads of final replies into batched fetches."""

    def __init__(self, fetch: Fetch) -> None:
        self._fetch = fetch
        self._wanted: dict[str, list[asyncio.Future[OutboundMessage | None]]] = {}
        self._reader: asyncio.Task[None] | None = None

    async def read(self, message_id: str) -> OutboundMessage | None:
        """The stored reply to ``message_id`` (None while there is none).

        Raises what the fetch raised (e.g. the store is away).
        """
        future: asyncio.Future[OutboundMessage | None] = asyncio.get_running_loop().create_future()
        self._wanted.setdefault(message_id, []).append(future)
        if self._reader is None or self._reader.done():
            self._reader = asyncio.create_task(self._read_all(), name="familiar-reply-reads")
        return await future

    async def _read_all(self) -> None:
        while self._wanted:
            await asyncio.sleep(0)  # the reads asked for in this loop iteration join
            batch, self._wanted = self._wanted, {}
            try:
                found = await self._fetch(list(batch))
            except Exception as exc:
                _fail_all(batch, exc)
                continue
            except BaseException:  # cancelled (the loop is closing): nobody waits forever
                _fail_all(batch, None)
                raise
            for message_id, futures in batch.items():
                reply = found.get(message_id)
                for future in futures:
                    if not future.done():
                        future.set_result(reply)


def _fail_all(
    batch: dict[str, list[asyncio.Future[OutboundMessage | None]]], error: Exception | None
) -> None:
    """Raise ``error`` in every waiter of ``batch`` (None: cancel them)."""
    for futures in batch.values():
        for future in futures:
            if future.done():
                continue
            if error is None:
                future.cancel()
            else:
                future.set_exception(error)
