"""A LISTEN connection that silently stops answering is noticed and replaced (a real server).

Between the listener and PostgreSQL sits a loopback proxy that can freeze the connections
it carries, as a network cut would: nothing closes, nothing more arrives. Only the probe
can notice that.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator

import pytest
from sqlalchemy.engine import make_url

from core.store.pg_listen import ListenConnection
from tests.waiting import eventually

pytestmark = pytest.mark.postgres


class FreezingProxy:
    """Forwards TCP connections to ``host:port``; ``freeze()`` stalls the ones open now."""

    def __init__(self, host: str, port: int) -> None:
        self._target = (host, port)
        self._frozen: list[asyncio.Event] = []  # one per carried connection: set = frozen
        self._server: asyncio.Server | None = None
        self._pumps: set[asyncio.Task[None]] = set()
        self.port = 0

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._carry, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        for pump in self._pumps:
            pump.cancel()
        await asyncio.gather(*self._pumps, return_exceptions=True)
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    def freeze(self) -> int:
        for frozen in self._frozen:
            frozen.set()
        return len(self._frozen)

    async def _carry(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        server_r, server_w = await asyncio.open_connection(*self._target)
        frozen = asyncio.Event()
        self._frozen.append(frozen)
        for reader, writer in ((client_r, server_w), (server_r, client_w)):
            pump = asyncio.create_task(self._pump(reader, writer, frozen))
            self._pumps.add(pump)

    @staticmethod
    async def _pump(
        reader: asyncio.StreamReader, writer: asyncio.StreamWriter, frozen: asyncio.Event
    ) -> None:
        try:
            while data := await reader.read(65536):
                if frozen.is_set():
                    await asyncio.Future()  # stalled for good: neither closed nor answered
                writer.write(data)
                await writer.drain()
        finally:
            writer.close()


@pytest.fixture
async def proxied(pg_url: str) -> AsyncIterator[tuple[str, FreezingProxy]]:
    url = make_url(pg_url)
    proxy = FreezingProxy(url.host or "127.0.0.1", url.port or 5432)
    await proxy.start()
    try:
        yield url.set(host="127.0.0.1", port=proxy.port).render_as_string(False), proxy
    finally:
        await proxy.stop()


async def test_a_connection_that_stops_answering_is_replaced(
    pg_url: str, proxied: tuple[str, FreezingProxy]
) -> None:
    proxied_url, proxy = proxied
    channel = f"familiar_probe_{uuid.uuid4().hex[:8]}"
    heard: list[str] = []
    listener = ListenConnection(
        proxied_url, channel, heard.append, what="test listener", probe_every=0.3
    )
    sender = ListenConnection(pg_url, channel, lambda _note: None, what="test sender")
    await listener.start()
    await sender.start()
    try:

        async def hears(note: str) -> bool:
            await sender.notify(note)
            return note in heard

        await eventually(lambda: hears("before"), what="a note through the proxy")
        assert proxy.freeze() == 1
        await eventually(lambda: hears("after"), what="a note on a new connection", timeout=20)
    finally:
        with contextlib.suppress(Exception):
            await sender.stop()
        await listener.stop()
