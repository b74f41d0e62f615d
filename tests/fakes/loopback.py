"""What the fake vendor servers share: an aiohttp app on 127.0.0.1 and its lifecycle."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from typing import Any, Self

from aiohttp import web


@dataclass(kw_only=True)
class LoopbackServer:
    """Serves ``routes()`` on 127.0.0.1 (port 0 by default); use as ``async with``.

    Attributes:
        requests: JSON bodies received, in order.
        headers: the headers of those requests.
        hits: ``time.monotonic()`` of each request.
    """

    port: int = 0
    requests: list[dict[str, Any]] = field(default_factory=list, init=False)
    headers: list[dict[str, str]] = field(default_factory=list, init=False)
    hits: list[float] = field(default_factory=list, init=False)
    _runner: web.AppRunner | None = field(default=None, init=False)
    _closing: asyncio.Event = field(default_factory=asyncio.Event, init=False)

    @property
    def calls(self) -> int:
        """How many requests arrived."""
        return len(self.requests)

    def routes(self, app: web.Application) -> None:
        raise NotImplementedError

    async def start(self) -> None:
        """Start listening."""
        app = web.Application()
        self.routes(app)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        # A real API takes a burst of a thousand connections; aiohttp's default backlog
        # (128) would drop SYNs and stall each dropped caller a second (TCP's retry).
        await web.TCPSite(self._runner, "127.0.0.1", self.port, backlog=4096).start()
        self.port = int(self._runner.addresses[0][1])

    async def stop(self) -> None:
        """Stop listening; stalled answers give up."""
        self._closing.set()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    async def _pause(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._closing.wait(), seconds)
