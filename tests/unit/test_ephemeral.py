"""EphemeralHub: per-message routing, nothing dropped, lagging subscribers get merged deltas."""

from __future__ import annotations

import asyncio

from core.bus.ephemeral import EphemeralHub
from core.messages import Delivery, Progress, StreamDelta
from tests.waiting import started

_TO = Delivery(channel="cli", chat_id="x")


def delta(message_id: str, text: str) -> StreamDelta:
    return StreamDelta(inbound_id=message_id, session_key="cli:x", delivery=_TO, text=text)


def progress(message_id: str, text: str) -> Progress:
    return Progress(inbound_id=message_id, session_key="cli:x", delivery=_TO, text=text)


async def test_subscribers_get_only_their_message() -> None:
    hub = EphemeralHub()
    assert not hub.has_subscribers("m1")
    async with hub.subscribe("m1") as mine, hub.subscribe("m2") as other:
        assert hub.has_subscribers("m1") and hub.has_subscribers("m2")
        hub.emit(delta("m1", "a"))
        hub.emit(delta("m3", "nobody"))
        assert (await mine.get()).text == "a"
        assert other.get_nowait() is None
    assert not hub.has_subscribers("m1") and not hub.has_subscribers("m2")


async def test_a_lagging_subscriber_gets_merged_deltas_and_every_note() -> None:
    hub = EphemeralHub()
    async with hub.subscribe("m") as sub:
        for i in range(100_000):
            hub.emit(delta("m", str(i % 10)))
        hub.emit(progress("m", "running exec…"))
        hub.emit(delta("m", "x"))
        hub.emit(delta("m", "y"))
        assert len(sub) == 3  # bounded by the notes, not by the deltas
        first, note, last = (await sub.get(), await sub.get(), await sub.get())
    assert first.text == "0123456789" * 10_000
    assert isinstance(note, Progress) and note.text == "running exec…"
    assert isinstance(last, StreamDelta) and last.text == "xy"


async def test_a_waiting_subscriber_is_woken_and_keeps_order() -> None:
    hub = EphemeralHub()
    async with hub.subscribe("m") as sub:
        getting = await started(sub.get())  # it waits for a delta
        hub.emit(delta("m", "a"))
        assert (await asyncio.wait_for(getting, 1)).text == "a"
        hub.emit(delta("m", "b"))
        assert (await sub.get()).text == "b"
        hub.emit(delta("m", "c"))
        hub.emit(delta("m", "d"))
        assert (await sub.get()).text == "cd"
        assert sub.get_nowait() is None
