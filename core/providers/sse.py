"""Server-sent events, decoded from the chunks of a streamed HTTP body."""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterable
from contextlib import aclosing
from dataclasses import dataclass

__all__ = ["LineSplitter", "SseDecoder", "SseEvent", "sse_events", "sse_lines"]


class LineSplitter:
    """Cuts body chunks into lines (LF or CRLF ends a line, and is not kept).

    A chunk may end anywhere, even inside a UTF-8 character: only whole lines come out.
    """

    def __init__(self) -> None:
        self._partial: list[bytes] = []

    def feed(self, chunk: bytes) -> list[bytes]:
        """Take one chunk; return the lines it completes."""
        lines = chunk.split(b"\n")
        if self._partial:
            self._partial.append(lines[0])
            lines[0] = b"".join(self._partial)
            self._partial = []
        tail = lines.pop()
        if tail:
            self._partial.append(tail)
        return [line[:-1] if line.endswith(b"\r") else line for line in lines]

    def rest(self) -> bytes:
        """What came after the last line end (a last line the body did not end)."""
        rest = b"".join(self._partial)
        self._partial = []
        return rest[:-1] if rest.endswith(b"\r") else rest


@dataclass(frozen=True, slots=True)
class SseEvent:
    """One dispatched event: its name (``message`` unless named) and its data."""

    event: str
    data: bytes


class SseDecoder:
    """Turns lines into :class:`SseEvent` s (the WHATWG event-stream rules).

    A blank line dispatches the event gathered so far; ``data`` lines are joined with
    LF; comments and ``id`` / ``retry`` fields are ignored.
    """

    def __init__(self) -> None:
        self._event = ""
        self._data: list[bytes] = []

    def line(self, line: bytes) -> SseEvent | None:
        """Take one line; return the event it dispatches, if any."""
        if not line:
            if not self._data and not self._event:
                return None
            event = SseEvent(event=self._event or "message", data=b"\n".join(self._data))
            self._event = ""
            self._data = []
            return event
        name, _, value = line.partition(b":")
        if value.startswith(b" "):
            value = value[1:]
        if name == b"data":
            self._data.append(value)
        elif name == b"event":
            self._event = value.decode(errors="replace")
        return None


async def sse_lines(chunks: AsyncIterable[bytes]) -> AsyncGenerator[bytes, None]:
    """The lines of a streamed body, as its chunks arrive (a last unended one too)."""
    splitter = LineSplitter()
    async for chunk in chunks:
        for line in splitter.feed(chunk):
            yield line
    if rest := splitter.rest():
        yield rest


async def sse_events(chunks: AsyncIterable[bytes]) -> AsyncGenerator[SseEvent, None]:
    """The events of a streamed body, as its chunks arrive (an unfinished last one is
    dropped, as the standard says)."""
    decoder = SseDecoder()
    # A last unended line dispatches nothing: only a blank line does.
    async with aclosing(sse_lines(chunks)) as lines:
        async for line in lines:
            if (event := decoder.line(line)) is not None:
                yield event
