"""The front's view of a channel that runs in a process of its own (``per-channel``).

`RemoteChannel` forwards the channel's HTTP routes (its ``http_routes`` prefixes) from
the gateway's HTTP port to the channel's private socket, and keeps the channel's state
(asked over that socket every half second) for ``/readyz``, ``familiar status`` and
``doctor``. While the channel's process is down, its routes answer 503 JSON ``{"error":
"channel NAME is restarting"}`` at once (the caller retries; nothing accepted is lost:
an answered request was stored first) and its state is ``failed`` with ``process
down`` and the supervisor's reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web
from multidict import CIMultiDict

from gateway.channel_socket import PEER_HEADER, STATE_PATH, channel_socket
from gateway.http_errors import error_response
from gateway.init import RUN_DIR
from gateway.process_table import process_name, read_processes
from gateway.supervisor import ChannelState

__all__ = ["RemoteChannel"]

log = logging.getLogger(__name__)

_POLL_SECONDS = 0.5
_HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "content-length",  # recomputed for the body as forwarded
        PEER_HEADER.lower(),  # only the front sets it
    }
)


class RemoteChannel:
    """One channel in its own process, as the front sees it.

    Args:
        home: the familiar home (its socket is ``run/channels/<name>.sock``).
        name: the channel's name.
        routes: the path prefixes it serves (``ChannelConfig.http_routes``).
        process_row: its process's row of the process table (default: read from the
            table the supervisor writes); the main process of ``processes = "main"``
            answers from its own `ChannelProcess`.
    """

    def __init__(
        self,
        home: Path,
        name: str,
        routes: tuple[str, ...] = (),
        *,
        process_row: Callable[[], Awaitable[dict[str, Any] | None]] | None = None,
    ) -> None:
        self.name = name
        self._process_row = process_row or self._table_row
        self.routes = routes
        self._home = home
        self._socket = channel_socket(home, name)
        self.state: ChannelState = "starting"
        self.error: str | None = None
        self._report: dict[str, Any] = {}
        self._seen = False
        self.answered_at: float | None = None
        """``time.monotonic()`` of the channel process's last answer."""
        self._session: aiohttp.ClientSession | None = None
        self._poll: asyncio.Task[None] | None = None

    @property
    def running(self) -> bool:
        return self.state == "running"

    @property
    def seen(self) -> bool:
        """Whether the channel's process ever answered (it was ready once)."""
        return self._seen

    def mount(self, app: web.Application) -> None:
        """Forward each prefix of ``routes`` (and what is below it) on ``app``."""
        for prefix in self.routes:
            app.router.add_route("*", prefix, self.forward)
            app.router.add_route("*", prefix.rstrip("/") + "/{tail:.*}", self.forward)

    async def start(self) -> None:
        connector = aiohttp.UnixConnector(path=str(self._socket))
        self._session = aiohttp.ClientSession(
            connector=connector,
            auto_decompress=False,  # bodies pass through as the channel encoded them
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=5),
        )
        self._poll = asyncio.create_task(self._poll_loop(), name=f"remote-{self.name}")

    async def stop(self) -> None:
        if self._poll is not None:
            self._poll.cancel()
            await asyncio.gather(self._poll, return_exceptions=True)
            self._poll = None
        if self._session is not None:
            await self._session.close()
            self._session = None
        self.state = "stopped"

    # -- state ---------------------------------------------------------------------------

    def as_json(self) -> dict[str, Any]:
        """What `ChannelSupervisor.as_json` gives in the channel's process (and its
        delivery failures), or ``failed``/``process down`` while that process is down."""
        base = {"name": self.name, "retry_in": None, "restarts": 0, **self._report}
        return {**base, "state": self.state, "error": self.error, "process": self.process}

    @property
    def process(self) -> str:
        return process_name(self.name)

    def not_ready(self) -> str | None:
        if self.state == "failed":
            return f"channel {self.name} failed: {self.error}"
        return None if self.running else f"channel {self.name} {self.state}"

    async def refresh(self) -> None:
        """Ask the channel's process for its state; on no answer, report it down."""
        assert self._session is not None
        try:
            async with self._session.get(
                "http://channel" + STATE_PATH, timeout=aiohttp.ClientTimeout(total=5)
            ) as response:
                report = await response.json()
            self._report = {k: v for k, v in report.items() if k not in ("state", "error")}
            self.state, self.error = report["state"], report.get("error")
            self._seen = True
            self.answered_at = time.monotonic()
        except (aiohttp.ClientError, TimeoutError, ValueError, KeyError, TypeError):
            await self._down()

    async def _table_row(self) -> dict[str, Any] | None:
        table = await read_processes(self._home / RUN_DIR) or []
        return next((p for p in table if p.get("name") == self.process), None)

    async def _down(self) -> None:
        row = await self._process_row()
        if row is not None and row.get("state") == "starting" and not self._seen:
            self.state, self.error = "starting", None  # not up yet: not a failure
            return
        why = row.get("error") if row is not None else None
        self._report.pop("retry_in", None)  # the dead process's plan, not a current one
        self.state = "failed"
        self.error = f"process down ({why})" if why else "process down"

    async def _poll_loop(self) -> None:
        while True:
            await self.refresh()
            await asyncio.sleep(_POLL_SECONDS)

    # -- HTTP ----------------------------------------------------------------------------

    async def forward(self, request: web.Request) -> web.StreamResponse:
        """Send ``request`` to the channel's process; stream its answer back."""
        if self._session is None:
            return self._restarting()
        headers = CIMultiDict(
            (k, v) for k, v in request.headers.items() if k.lower() not in _HOP_BY_HOP
        )
        if request.remote:
            headers[PEER_HEADER] = request.remote
        body = await request.read()
        try:
            upstream = await self._session.request(
                request.method,
                "http://channel" + str(request.rel_url),
                headers=headers,
                data=body,
                allow_redirects=False,
                skip_auto_headers=("Accept-Encoding", "User-Agent", "Content-Type"),
            )
        except (aiohttp.ClientConnectionError, TimeoutError) as exc:
            log.info(
                "channel %s unreachable for %s %s: %s", self.name, request.method, request.path, exc
            )
            if self.state == "running":
                await self._down()
            return self._restarting()
        async with upstream:
            response = web.StreamResponse(status=upstream.status, reason=upstream.reason)
            for key, value in upstream.headers.items():
                if key.lower() not in _HOP_BY_HOP:
                    response.headers.add(key, value)
            if upstream.content_length is not None:
                response.content_length = upstream.content_length
            await response.prepare(request)
            with contextlib.suppress(aiohttp.ClientPayloadError, aiohttp.ClientConnectionError):
                async for chunk in upstream.content.iter_any():
                    await response.write(chunk)
                await response.write_eof()
                return response
            # The channel's process died mid-answer: the client sees a cut connection.
            log.warning(
                "channel %s stopped mid-answer to %s %s", self.name, request.method, request.path
            )
            if request.transport is not None:
                request.transport.close()
            return response

    def _restarting(self) -> web.Response:
        return error_response(503, f"channel {self.name} is restarting")
