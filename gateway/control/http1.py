"""A minimal HTTP/1.1 client over a Unix socket: one request per connection, asyncio streams.

What the control client needs and no more: a request with an optional body, the status,
and the body read whole or piece by piece as it arrives (chunked, sized or until the
server closes). Stdlib only: ``familiar send`` must not pay for aiohttp's import.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from types import TracebackType

__all__ = ["Exchange", "HungUp", "Response"]

_HOST = "familiar"


class HungUp(ConnectionError):
    """The server closed the connection, or sent what is not HTTP, before the answer ended."""


class Response:
    """The status and headers of an answer; its body is read with `read` or `pieces`.

    Every read ends by ``deadline`` (an event-loop time; None: no limit), raising
    `TimeoutError` after it.
    """

    def __init__(
        self,
        reader: asyncio.StreamReader,
        *,
        status: int,
        reason: str,
        headers: dict[str, str],
        deadline: float | None,
    ) -> None:
        self.status = status
        self.reason = reason
        self.headers = headers
        self._reader = reader
        self._deadline = deadline

    async def read(self) -> bytes:
        """The whole body."""
        return b"".join([piece async for piece in self.pieces()])

    async def pieces(self) -> AsyncIterator[bytes]:
        """The body as it arrives; raises `HungUp` when the server stops before its end."""
        if self.headers.get("transfer-encoding", "").lower() == "chunked":
            while size := _number(await self._line(), 16):
                yield await self._exactly(size)
                await self._exactly(2)  # the CRLF after each chunk
            while await self._line():  # trailers, up to the blank line
                pass
        elif (length := self.headers.get("content-length")) is not None:
            left = _number(length.encode(), 10)
            while left > 0:
                piece = await self._some(min(left, 1 << 16))
                left -= len(piece)
                yield piece
        else:
            while piece := await self._some(1 << 16, eof_ok=True):
                yield piece

    async def _line(self) -> bytes:
        async with asyncio.timeout_at(self._deadline):
            line = await self._reader.readline()
        if not line.endswith(b"\n"):
            raise HungUp("the server closed the connection mid-answer")
        return line.rstrip(b"\r\n")

    async def _exactly(self, size: int) -> bytes:
        try:
            async with asyncio.timeout_at(self._deadline):
                return await self._reader.readexactly(size)
        except asyncio.IncompleteReadError:
            raise HungUp("the server closed the connection mid-answer") from None

    async def _some(self, size: int, *, eof_ok: bool = False) -> bytes:
        async with asyncio.timeout_at(self._deadline):
            piece = await self._reader.read(size)
        if not piece and not eof_ok:
            raise HungUp("the server closed the connection mid-answer")
        return piece


class Exchange:
    """One request on a fresh connection to ``socket``, as an async context manager::

        async with Exchange(path, "GET", "/v1/status", connect_timeout=5, total=30) as resp:
            body = await resp.read()

    Raises (on entry, and from the response's reads):
        OSError: the socket is missing, refuses, or breaks (``HungUp`` among them).
        TimeoutError: no connection within ``connect_timeout``, or no answer by ``total``.
    """

    def __init__(
        self,
        socket: Path,
        method: str,
        target: str,
        *,
        body: bytes | None = None,
        headers: Mapping[str, str] | None = None,
        connect_timeout: float,
        total: float | None,
    ) -> None:
        self._socket = socket
        self._head = _head(method, target, body, headers or {})
        self._body = body or b""
        self._connect_timeout = connect_timeout
        self._total = total
        self._writer: asyncio.StreamWriter | None = None

    async def __aenter__(self) -> Response:
        loop = asyncio.get_running_loop()
        deadline = None if self._total is None else loop.time() + self._total
        async with asyncio.timeout(self._connect_timeout):
            reader, self._writer = await asyncio.open_unix_connection(str(self._socket))
        try:
            self._writer.write(self._head + self._body)
            async with asyncio.timeout_at(deadline):
                await self._writer.drain()
            return await _response(reader, deadline)
        except BaseException:
            self._close()
            raise

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._close()

    def _close(self) -> None:
        if self._writer is not None:
            # abort, not close: nothing is left to send, and waiting for a hung peer is wrong
            self._writer.transport.abort()
            self._writer = None


def _number(text: bytes, base: int) -> int:
    """A chunk size (hex, maybe with extensions) or a Content-Length; HungUp if neither."""
    try:
        return int(text.split(b";", 1)[0], base)
    except ValueError:
        raise HungUp(f"not HTTP from the server: {text[:80]!r}") from None


def _head(method: str, target: str, body: bytes | None, headers: Mapping[str, str]) -> bytes:
    lines = [f"{method} {target} HTTP/1.1", f"Host: {_HOST}", "Connection: close"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    if body is not None:
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


async def _response(reader: asyncio.StreamReader, deadline: float | None) -> Response:
    async with asyncio.timeout_at(deadline):
        status_line = await reader.readline()
        parts = status_line.decode("latin-1").rstrip("\r\n").split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
            raise HungUp(f"not HTTP from the server: {status_line[:80]!r}")
        headers: dict[str, str] = {}
        while (line := await reader.readline()) not in (b"\r\n", b"\n"):
            if not line.endswith(b"\n"):
                raise HungUp("the server closed the connection mid-answer")
            name, _, value = line.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
    reason = parts[2] if len(parts) > 2 else ""
    return Response(reader, status=int(parts[1]), reason=reason, headers=headers, deadline=deadline)
