"""Server-Sent Events of the web panel: an HTML fragment arrives whole, whatever its line
ends."""

from __future__ import annotations

import asyncio

from aiohttp import web

from gateway.ui.routes import EventStream


class Written(web.StreamResponse):
    """A response that keeps what is written to it."""

    def __init__(self) -> None:
        super().__init__()
        self.body_written = b""

    async def write(self, data: bytes | bytearray | memoryview) -> None:
        self.body_written += bytes(data)


def parse(raw: str) -> list[tuple[str, str]]:
    """Events as a browser reads them (the SSE spec: CR, LF and CRLF end a line)."""
    events, name, data = [], "message", []
    for line in raw.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        if not line:
            if data:
                events.append((name, "\n".join(data)))
            name, data = "message", []
        elif line.startswith("event: "):
            name = line.removeprefix("event: ")
        elif line.startswith("data: "):
            data.append(line.removeprefix("data: "))
    return events


async def test_fragments_survive_any_line_end() -> None:
    response = Written()
    stream = EventStream(response, asyncio.Event())
    html = "<p>one\r\ntwo\rthree\nfour</p>\n"
    await stream.send("append", html)
    await stream.send("replace", "")
    await stream.keepalive()
    assert parse(response.body_written.decode()) == [
        ("append", "<p>one\ntwo\nthree\nfour</p>\n"),
        ("replace", ""),
    ]


async def test_wait_ends_early_when_the_gateway_stops() -> None:
    stopping = asyncio.Event()
    stream = EventStream(Written(), stopping)
    stopping.set()
    assert await asyncio.wait_for(stream.wait(3600), 5) is False
