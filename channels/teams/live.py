"""A reply as it streams, in a 1:1 chat: one message showing the text so far, then the
final text in its place.

Once deltas have been streaming for ``first_wait`` seconds (a quick reply needs none), a
message with the text so far is posted and edited at most once per ``interval``; the
final reply replaces it (`TeamsChannel.send`). Edits go through the Bot Connector
(``PUT .../activities/{id}``), like every other Teams call.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable

from channels.teams.render import MAX_CHARS
from core.bus.ephemeral import EphemeralHub, Subscription
from core.messages import StreamDelta

__all__ = ["LiveText"]

log = logging.getLogger(__name__)

_MAX_LIFETIME = 3600.0
"""A message whose reply never comes to this process stops being watched after this."""


class LiveText:
    """Shows one message's reply while it streams, until `finish` (its reply is here).

    Args:
        hub: where the message's ephemerals are emitted.
        message_id: the inbound message.
        post: posts a new message with this text; returns its activity id.
        edit: replaces the text of the message with this activity id.
        interval: the shortest time between two edits.
        first_wait: seconds of streaming before the message is posted.
    """

    def __init__(
        self,
        *,
        hub: EphemeralHub,
        message_id: str,
        post: Callable[[str], Awaitable[str]],
        edit: Callable[[str, str], Awaitable[None]],
        interval: float,
        first_wait: float,
    ) -> None:
        self._hub = hub
        self._message_id = message_id
        self._post = post
        self._edit = edit
        self._interval = interval
        self._first_wait = first_wait
        self._exit = contextlib.AsyncExitStack()
        self._subscription: Subscription | None = None
        self._lock = asyncio.Lock()
        self._closed = False
        self._task: asyncio.Task[None] | None = None
        self._on_expired: Callable[[], object] = lambda: None
        self.placeholder: str | None = None
        """The activity id of the posted message, once posted."""
        self.updates = 0

    async def open(self) -> None:
        """Subscribe to the message's ephemerals (before it is published)."""
        self._subscription = await self._exit.enter_async_context(
            self._hub.subscribe(self._message_id)
        )

    def start(self, *, on_expired: Callable[[], object]) -> None:
        """Begin following the stream (after `open`); ``on_expired`` runs if no reply
        came within the lifetime (then it unsubscribes itself)."""
        self._on_expired = on_expired
        self._task = asyncio.create_task(self._run(), name=f"teams-live-{self._message_id}")

    async def finish(self) -> str | None:
        """Stop following; returns the posted message's activity id (None if none)."""
        self._closed = True
        async with self._lock:  # a post or edit in flight ends first
            if self._task is not None:
                self._task.cancel()
                await asyncio.gather(self._task, return_exceptions=True)
        await self._exit.aclose()
        return self.placeholder

    async def _run(self) -> None:
        subscription = self._subscription
        assert subscription is not None, "open() first"
        try:
            async with asyncio.timeout(_MAX_LIFETIME):
                await self._follow(subscription)
        except TimeoutError:
            log.info("no reply came within %.0fs; streaming no longer shown", _MAX_LIFETIME)
            await self._exit.aclose()  # nobody calls finish(): unsubscribe here
            self._on_expired()
        except Exception:
            log.exception("showing the streamed reply failed")

    async def _follow(self, subscription: Subscription) -> None:
        text: list[str] = []
        first: float | None = None
        last = 0.0
        dirty = False
        while True:
            wait = None
            if dirty and first is not None:
                due = first + self._first_wait if self.updates == 0 else last + self._interval
                wait = max(0.0, due - time.monotonic())
            item = await subscription.next(wait)
            if isinstance(item, StreamDelta) and item.text:
                text.append(item.text)
                first = time.monotonic() if first is None else first
                dirty = True
            if not dirty or first is None:
                continue
            now = time.monotonic()
            due = first + self._first_wait if self.updates == 0 else last + self._interval
            if now >= due:
                await self._push("".join(text))
                last, dirty = time.monotonic(), False

    async def _push(self, text: str) -> None:
        shown = text if len(text) <= MAX_CHARS - 2 else text[: MAX_CHARS - 2] + " …"
        async with self._lock:
            if self._closed:
                return
            try:
                if self.placeholder is None:
                    self.placeholder = await self._post(shown)
                else:
                    await self._edit(self.placeholder, shown)
                self.updates += 1
            except Exception as exc:  # the final reply still comes; this is a courtesy
                log.info("teams streaming update failed: %s", exc)
