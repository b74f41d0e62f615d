"""A webhook caller's callback endpoint: records signed reply POSTs, answers as told."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from channels.webhook import sign
from tests.fakes.loopback import LoopbackServer

__all__ = ["CallbackServer"]


@dataclass(kw_only=True)
class CallbackServer(LoopbackServer):
    """``POST /hook/...``: answers ``answers[i]`` to the i-th call (the last one repeats).

    Attributes:
        secret: the hook's secret, to check signatures with.
        answers: HTTP statuses to answer with, in order.
        bodies: the raw bodies received.
        paths: the path (and query) of each call, as sent on the request line.
        valid: whether each call's signature was valid.
    """

    secret: str = ""
    answers: list[int] = field(default_factory=lambda: [200])
    bodies: list[bytes] = field(default_factory=list, init=False)
    paths: list[str] = field(default_factory=list, init=False)
    valid: list[bool] = field(default_factory=list, init=False)
    _arrived: asyncio.Condition = field(default_factory=asyncio.Condition, init=False)

    def url(self, path: str = "hook/") -> str:
        return f"http://127.0.0.1:{self.port}/{path}"

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/{tail:.*}", self._callback)

    async def _callback(self, request: web.Request) -> web.Response:
        body = await request.read()
        timestamp = request.headers.get("X-Familiar-Timestamp", "")
        signature = request.headers.get("X-Familiar-Signature", "")
        status = self.answers[min(len(self.bodies), len(self.answers) - 1)]
        async with self._arrived:
            self.bodies.append(body)
            self.paths.append(request.raw_path)
            self.headers.append(dict(request.headers))
            self.requests.append(await request.json())
            self.valid.append(bool(timestamp) and signature == sign(self.secret, timestamp, body))
            self._arrived.notify_all()
        return web.json_response({"ok": status < 300}, status=status)

    async def wait_calls(self, n: int, timeout: float = 10.0) -> list[dict[str, Any]]:
        """The first ``n`` callback bodies, once they arrived."""
        async with asyncio.timeout(timeout), self._arrived:
            await self._arrived.wait_for(lambda: len(self.requests) >= n)
        return self.requests[:n]
