"""Signs of life while the agent works on one message: thread status or a placeholder.

With Slack's assistant thread status the thread shows "is thinking…" and each progress
note. Where the app cannot set one, a placeholder message is posted in the thread once
the reply has taken ``first_wait`` seconds (a quick reply needs none), showing what has
streamed so far and the latest progress note, and is edited at most once per
``interval``; the final reply replaces it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from channels.slack.api import SlackApi, SlackError
from channels.slack.render import MAX_CHARS, to_mrkdwn
from core.bus.ephemeral import EphemeralHub, Subscription
from core.messages import StreamDelta

__all__ = ["LiveReply"]

log = logging.getLogger(__name__)

_THINKING = "is thinking…"
_MAX_LIFETIME = 3600.0
"""A message whose reply never comes to this process stops being watched after this."""


class LiveReply:
    """Shows that one message is being worked on, until `finish` (its reply is here).

    Args:
        api: the Slack calls.
        channel: the conversation.
        thread_ts: the thread replies go to (None: top level, so no thread status).
        hub: where the message's ephemerals are emitted.
        message_id: the message.
        interval: the shortest time between two edits of the placeholder.
        first_wait: post the placeholder after this long even if nothing streamed.
    """

    def __init__(
        self,
        *,
        api: SlackApi,
        channel: str,
        thread_ts: str | None,
        hub: EphemeralHub,
        message_id: str,
        interval: float = 1.0,
        first_wait: float = 1.0,
    ) -> None:
        self._api = api
        self._channel = channel
        self._thread_ts = thread_ts
        self._hub = hub
        self._message_id = message_id
        self._exit = contextlib.AsyncExitStack()
        self._subscription: Subscription | None = None
        self._interval = interval
        self._first_wait = first_wait
        self._lock = asyncio.Lock()
        self._closed = False
        self.placeholder: str | None = None
        """The ts of the placeholder message, once posted."""
        self.status = False
        """Whether the thread status was set."""
        self.updates = 0
        self._task: asyncio.Task[None] | None = None

    async def open(self) -> None:
        """Subscribe to the message's ephemerals (before it is published)."""
        self._subscription = await self._exit.enter_async_context(
            self._hub.subscribe(self._message_id)
        )

    def start(self) -> None:
        """Begin showing signs of life (after `open`)."""
        self._task = asyncio.create_task(self._run(), name=f"slack-live-{self._message_id}")

    async def finish(self) -> str | None:
        """Stop showing signs of life; returns the placeholder's ts (None if none)."""
        self._closed = True
        async with self._lock:  # an edit in flight ends first
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
                if self._thread_ts is not None:
                    async with self._lock:
                        if not self._closed:
                            self.status = await self._api.set_status(
                                self._channel, self._thread_ts, _THINKING
                            )
                await self._follow(subscription)
        except TimeoutError:
            log.info("no reply came within %.0fs; progress no longer shown", _MAX_LIFETIME)
        except Exception:
            log.exception("showing progress failed")

    async def _follow(self, subscription: Subscription) -> None:
        text: list[str] = []
        note = ""
        shown_note = _THINKING
        dirty = False
        started = last = time.monotonic()
        while True:
            item = await subscription.next(self._wait(started, last, dirty=dirty))
            if isinstance(item, StreamDelta):
                text.append(item.text)
                note = ""
                dirty = True
            elif item is not None:
                note = item.text
                dirty = True
            elif self.placeholder is None and not self.status:
                dirty = True  # silent for first_wait: show something anyway
            now = time.monotonic()
            due = started + self._first_wait if self.updates == 0 else last + self._interval
            if dirty and now >= due:
                if not self.status:
                    await self._push_placeholder("".join(text), note)
                elif note and note != shown_note:
                    await self._push_status(note)
                    shown_note = note
                last, dirty = time.monotonic(), False

    def _wait(self, started: float, last: float, *, dirty: bool) -> float | None:
        """How long to wait for the next ephemeral before acting anyway."""
        now = time.monotonic()
        if self.updates == 0 and not self.status:
            return max(0.0, started + self._first_wait - now)  # a quick reply needs none
        if dirty:
            return max(0.0, last + self._interval - now)
        return None

    async def _push_status(self, note: str) -> None:
        async with self._lock:
            if self._closed or self._thread_ts is None:
                return
            await self._api.set_status(self._channel, self._thread_ts, note[:100])
            self.updates += 1

    async def _push_placeholder(self, text: str, note: str) -> None:
        shown = to_mrkdwn(text) if text else ""
        if len(shown) > MAX_CHARS - 40:
            shown = shown[: MAX_CHARS - 40] + " …"
        if note:
            shown = f"{shown}\n\n_{note}_" if shown else f"_{note}_"
        shown = shown or "_…_"
        async with self._lock:
            if self._closed:
                return
            try:
                if self.placeholder is None:
                    self.placeholder = await self._api.post(
                        self._channel, shown, thread_ts=self._thread_ts
                    )
                else:
                    await self._api.update(self._channel, self.placeholder, shown)
                self.updates += 1
            except SlackError as exc:  # the final reply still comes; this is a courtesy
                log.info("progress update failed: %s", exc)
