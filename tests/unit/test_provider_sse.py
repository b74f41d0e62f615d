"""Server-sent events decoded from body chunks cut anywhere."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from core.providers.sse import SseEvent, sse_events, sse_lines

STREAM = (
    ": a comment\r\n"
    "event: message_start\r\n"
    'data: {"t": "héllo ✓"}\r\n'
    "\r\n"
    "event: ping\n"
    "data:\n"
    "\n"
    "data: first\n"
    "data:second\n"
    "id: 7\n"
    "retry: 10\n"
    "\n"
    "data: unfinished"
).encode()


async def chunks(data: bytes, size: int) -> AsyncIterator[bytes]:
    for i in range(0, len(data), size):
        yield data[i : i + size]


@pytest.mark.parametrize("size", [1, 2, 3, 7, 1000])
async def test_events_whatever_the_chunk_boundaries(size: int) -> None:
    events = [e async for e in sse_events(chunks(STREAM, size))]

    assert events == [
        SseEvent(event="message_start", data='{"t": "héllo ✓"}'.encode()),
        SseEvent(event="ping", data=b""),
        SseEvent(event="message", data=b"first\nsecond"),
    ]


@pytest.mark.parametrize("size", [1, 5, 1000])
async def test_lines_keep_an_unended_last_line(size: int) -> None:
    lines = [
        line async for line in sse_lines(chunks(b"data: a\r\n\ndata: \xc3\xa9\ndata: z", size))
    ]

    assert lines == [b"data: a", b"", "data: é".encode(), b"data: z"]
