"""ControlClient when the daemon dies in the middle of a streamed answer (kill -9)."""

from __future__ import annotations

import asyncio
import json
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from gateway.control.client import ControlClient, DaemonUnavailable, socket_path
from gateway.control.protocol import Accepted

_HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\nTransfer-Encoding: chunked\r\n\r\n"
)


@pytest.fixture
def home() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="fam-", dir="/tmp"))  # short socket path
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


@asynccontextmanager
async def dying_daemon(home: Path, answers: list[bytes]) -> AsyncIterator[list[dict[str, object]]]:
    """Answers the n-th POST with ``answers[n]`` (head and chunks), then hangs up mid-body."""
    bodies: list[dict[str, object]] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(
            int(line.split(b":", 1)[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        )
        bodies.append(json.loads(await reader.readexactly(length)))
        writer.write(answers[min(len(bodies), len(answers)) - 1])
        await writer.drain()
        writer.transport.abort()  # like a killed process: no last chunk

    path = socket_path(home)
    path.parent.mkdir(parents=True, exist_ok=True)
    server = await asyncio.start_unix_server(serve, path=str(path))
    try:
        yield bodies
    finally:
        server.close()
        await server.wait_closed()


async def test_hangup_after_accepted_is_daemon_unavailable(home: Path) -> None:
    accepted = b'{"type": "accepted", "message_id": "m1", "session": "cli:x"}\n'
    async with dying_daemon(home, [_HEAD + _chunk(accepted)]) as bodies:
        lines = []
        with pytest.raises(DaemonUnavailable):
            async with ControlClient(home) as client:
                async for line in client.send("cli:x", "hi", stream=False):
                    lines.append(line)
    assert [type(line) for line in lines] == [Accepted]
    assert len(bodies) == 1  # accepted: never sent again


async def test_hangup_before_accepted_sends_again_with_the_same_client_id(home: Path) -> None:
    async with dying_daemon(home, [_HEAD]) as bodies:
        with pytest.raises(DaemonUnavailable):
            async with ControlClient(home) as client:
                async for _ in client.send("cli:x", "hi", stream=False):
                    pass
    assert len(bodies) == 2
    assert bodies[0]["client_id"] == bodies[1]["client_id"]


async def test_an_answer_that_is_not_http_is_daemon_unavailable(home: Path) -> None:
    bad_chunk = _HEAD + b"zz\r\n"  # a chunk size that is not hex
    async with dying_daemon(home, [b"SSH-2.0-OpenSSH\r\n", bad_chunk]) as bodies:
        with pytest.raises(DaemonUnavailable, match="not HTTP"):
            async with ControlClient(home) as client:
                async for _ in client.send("cli:x", "hi", stream=False):
                    pass
    assert len(bodies) == 2  # nothing was accepted: sent once more, with the same id
