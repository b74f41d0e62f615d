"""Batched reads of stored replies: many waiters, few fetches."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from core.bus.reply_reads import ReplyReads
from core.messages import Delivery, InboundMessage, OutboundMessage
from tests.waiting import started


def _reply(n: int) -> OutboundMessage:
    inbound = InboundMessage(
        id=f"m{n}", session_key="cli:x", text="hi", delivery=Delivery(channel="cli", chat_id="x")
    )
    return OutboundMessage.answering(inbound, f"re {n}")


class _Stored:
    """A store of replies that records each fetch and can be made to fail or to hold
    a fetch (a store round trip in flight) until ``release`` is set."""

    def __init__(self, replies: dict[str, OutboundMessage]) -> None:
        self.replies = replies
        self.fetches: list[list[str]] = []
        self.error: Exception | None = None
        self.fetching = asyncio.Event()
        self.release = asyncio.Event()
        self.release.set()

    async def fetch(self, ids: Sequence[str]) -> dict[str, OutboundMessage]:
        self.fetches.append(list(ids))
        self.fetching.set()
        await self.release.wait()
        if self.error is not None:
            raise self.error
        return {i: self.replies[i] for i in ids if i in self.replies}


async def test_reads_of_one_moment_share_one_fetch_and_get_their_own_reply() -> None:
    stored = _Stored({f"m{n}": _reply(n) for n in range(0, 100, 2)})
    reads = ReplyReads(stored.fetch)
    got = await asyncio.gather(*(reads.read(f"m{n}") for n in range(100)))
    assert stored.fetches == [[f"m{n}" for n in range(100)]]
    for n, reply in enumerate(got):
        assert (reply.text if reply else None) == (f"re {n}" if n % 2 == 0 else None)


async def test_reads_asked_for_during_a_fetch_go_together_in_the_next() -> None:
    stored = _Stored({"m1": _reply(1), "m2": _reply(2), "m3": _reply(3)})
    stored.release.clear()
    reads = ReplyReads(stored.fetch)
    first = asyncio.ensure_future(reads.read("m1"))
    await stored.fetching.wait()
    pending = [await started(reads.read(i)) for i in ("m2", "m3", "m2")]
    stored.release.set()
    later = await asyncio.gather(*pending)
    assert (await first) is not None
    assert stored.fetches == [["m1"], ["m2", "m3"]]
    assert [r.text if r else None for r in later] == ["re 2", "re 3", "re 2"]


async def test_a_failed_fetch_raises_in_its_readers_and_the_next_read_fetches_again() -> None:
    stored = _Stored({"m1": _reply(1)})
    stored.error = ConnectionError("store away")
    reads = ReplyReads(stored.fetch)
    results = await asyncio.gather(reads.read("m1"), reads.read("m2"), return_exceptions=True)
    assert all(isinstance(r, ConnectionError) for r in results)
    stored.error = None
    reply = await reads.read("m1")
    assert reply is not None and reply.text == "re 1"


async def test_a_cancelled_reader_leaves_the_others_served() -> None:
    stored = _Stored({"m1": _reply(1), "m2": _reply(2)})
    reads = ReplyReads(stored.fetch)
    gone = await started(reads.read("m1"))
    kept = await started(reads.read("m2"))
    gone.cancel()
    with pytest.raises(asyncio.CancelledError):
        await gone
    reply = await kept
    assert reply is not None and reply.text == "re 2"
