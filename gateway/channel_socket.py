"""The private socket of a channel in a process of its own (``channel_processes = "per-channel"``).

A ``channel:<name>`` process serves ``<home>/run/channels/<name>.sock`` (mode 0600, in a
0700 folder): the routes its channel mounts (which the gateway's HTTP front forwards
there) and `STATE_PATH`, the channel's state (what ``/readyz``, ``familiar status`` and
``doctor`` show, read by the front).

The front passes the client's address in `PEER_HEADER`; `trusted_peer` (installed on
this private app only) turns it into ``request.remote`` and removes the header, so a
channel reads the real peer as it would on the front (Teams' anonymous mode refuses
non-loopback peers). The front drops a client-sent header of that name.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from aiohttp import web
from multidict import CIMultiDict, CIMultiDictProxy

from gateway.http_errors import Handler, body_checks
from gateway.init import RUN_DIR

__all__ = [
    "CHANNELS_DIR",
    "PEER_HEADER",
    "STATE_PATH",
    "channel_app",
    "channel_lock",
    "channel_socket",
    "channels_dir",
]

CHANNELS_DIR = "channels"
"""``<home>/run/channels``: one socket and one lock per channel process."""
PEER_HEADER = "X-Familiar-Peer"
"""The client's address, set by the front; trusted only on the private socket."""
STATE_PATH = "/.familiar/channel"
"""The channel's state on its private socket (not forwarded by the front)."""


def channels_dir(home: Path) -> Path:
    return home / RUN_DIR / CHANNELS_DIR


def channel_socket(home: Path, name: str) -> Path:
    return channels_dir(home) / f"{name}.sock"


def channel_lock(home: Path, name: str) -> Path:
    """Held by the one process of channel ``name`` in this home."""
    return channels_dir(home) / f"{name}.lock"


@web.middleware
async def trusted_peer(request: web.Request, handler: Handler) -> web.StreamResponse:
    """``request.remote`` = the front's `PEER_HEADER` (None without one), header removed."""
    peer = request.headers.get(PEER_HEADER)
    headers = CIMultiDict(request.headers)
    headers.popall(PEER_HEADER, None)
    if peer:
        return await handler(request.clone(headers=CIMultiDictProxy(headers), remote=peer))
    return await handler(request.clone(headers=CIMultiDictProxy(headers)))


def channel_app(state: Callable[[], dict[str, Any]]) -> web.Application:
    """The private app: `STATE_PATH` answers ``state()``; the channel adds its routes."""

    async def report(_request: web.Request) -> web.Response:
        return web.json_response(state())

    checks = body_checks(too_large_hint="send a smaller body")
    app = web.Application(middlewares=[trusted_peer, checks])
    app.router.add_get(STATE_PATH, report)
    return app
