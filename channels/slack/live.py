"""Signs of life while the agent works on one message: thread status, a streamed reply
or a placeholder.

With Slack's assistant thread status the thread shows "is thinking…" and each progress
note. The reply's text is streamed into the thread as it is generated with Slack's
streaming methods (``chat.startStream`` / ``appendStream``), at most one call per
``interval``; the final reply ends the stream (`SlackChannel.send`). Where the app
cannot stream (Slack refuses ``chat.startStream`` as unavailable: remembered for the
workspace) or the reply goes to the top level, a placeholder message is posted instead,
showing what has streamed so far and the latest progress note, edited at most once per
``interval``; the final reply replaces it. Either starts once the reply has taken
``first_wait`` seconds (a quick reply needs none). A streaming call that fails ends
the streaming for that reply: the final reply then replaces the message whole.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass
from typing import Literal

from channels.slack.api import SlackApi, SlackError
from channels.slack.render import MAX_CHARS, to_mrkdwn
from core.bus.ephemeral import EphemeralHub, Subscription
from core.messages import StreamDelta

__all__ = ["STREAM_CHARS", "LiveReply", "Shown"]

log = logging.getLogger(__name__)

_THINKING = "is thinking…"
_MAX_LIFETIME = 3600.0
"""A message whose reply never comes to this process stops being watched after this."""
STREAM_CHARS = MAX_CHARS - 40
"""Markdown streamed into one message at most (the rest comes with the final reply)."""


@dataclass(slots=True)
class Shown:
    """The message showing a reply's progress, which the final reply takes over.

    Attributes:
        ts: the message.
        kind: ``stream`` (started with ``chat.startStream``) or ``placeholder``.
        streamed: the Markdown the stream holds (every call for it succeeded).
        intact: whether every streaming call succeeded, so the message holds exactly
            ``streamed`` and is still streaming.
    """

    ts: str
    kind: Literal["stream", "placeholder"]
    streamed: str = ""
    intact: bool = True


class LiveReply:
    """Shows that one message is being worked on, until `finish` (its reply is here).

    Args:
        api: the Slack calls.
        channel: the conversation.
        thread_ts: the thread replies go to (None: top level, so no thread status and
            no streaming).
        user: who asked (a streamed reply's recipient).
        team: that user's workspace.
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
        user: str,
        team: str,
        hub: EphemeralHub,
        message_id: str,
        interval: float = 1.0,
        first_wait: float = 1.0,
    ) -> None:
        self._api = api
        self._channel = channel
        self._thread_ts = thread_ts
        self._user = user
        self._team = team
        self._hub = hub
        self._message_id = message_id
        self._exit = contextlib.AsyncExitStack()
        self._subscription: Subscription | None = None
        self._interval = interval
        self._first_wait = first_wait
        self._lock = asyncio.Lock()
        self._closed = False
        self.shown: Shown | None = None
        """The message showing progress (a stream or a placeholder), once posted."""
        self._stream_refused = False
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

    async def finish(self) -> Shown | None:
        """Stop showing signs of life; the message showing progress (None if none)."""
        self._closed = True
        async with self._lock:  # an edit in flight ends first
            if self._task is not None:
                self._task.cancel()
                await asyncio.gather(self._task, return_exceptions=True)
        await self._exit.aclose()
        return self.shown

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
            elif self.shown is None and not self.status:
                dirty = True  # silent for first_wait: show something anyway
            now = time.monotonic()
            due = started + self._first_wait if self.updates == 0 else last + self._interval
            if dirty and now >= due:
                await self._show("".join(text), note)
                if self.status and note and note != shown_note:
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

    async def _show(self, text: str, note: str) -> None:
        """Stream ``text``, or show it and ``note`` in the placeholder."""
        if self.status and not text and self.shown is None:
            return  # the thread status is the sign of life until text comes
        if self._can_stream() and await self._push_stream(text):
            return
        if not self.status and not self._streaming():
            await self._push_placeholder(text, note)

    def _streaming(self) -> bool:
        return self.shown is not None and self.shown.kind == "stream"

    def _can_stream(self) -> bool:
        if self._thread_ts is None or self._stream_refused or not self._api.streaming:
            return False
        return self.shown is None or (self._streaming() and self.shown.intact)

    async def _push_stream(self, text: str) -> bool:
        """Start the stream or append what is new; False if this reply cannot stream."""
        async with self._lock:
            if self._closed:
                return True
            shown, thread_ts = self.shown, self._thread_ts
            assert thread_ts is not None
            done = shown.streamed if shown is not None else ""
            new = text[len(done) : STREAM_CHARS]
            try:
                if shown is None:
                    ts = await self._api.start_stream(
                        self._channel, thread_ts, new, user=self._user, team=self._team
                    )
                    if ts is None:  # this workspace cannot stream
                        return False
                    self.shown = Shown(ts=ts, kind="stream", streamed=new)
                elif new:
                    await self._api.append_stream(self._channel, shown.ts, new)
                    shown.streamed += new
                else:
                    return True
                self.updates += 1
            except SlackError as exc:  # the final reply replaces the message whole
                if shown is None:
                    log.info("starting a stream failed (%s): using a placeholder", exc)
                    self._stream_refused = True
                    return False
                log.info("streaming failed (%s): the final reply replaces it", exc)
                shown.intact = False
            return True

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
                if self.shown is None:
                    ts = await self._api.post(self._channel, shown, thread_ts=self._thread_ts)
                    self.shown = Shown(ts=ts, kind="placeholder")
                else:
                    await self._api.update(self._channel, self.shown.ts, shown)
                self.updates += 1
            except SlackError as exc:  # the final reply still comes; this is a courtesy
                log.info("progress update failed: %s", exc)
