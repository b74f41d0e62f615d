"""The per-channel front and a channel's private socket, on real sockets in one process.

A stand-in channel app (what a ``channel:<name>`` process serves: `channel_app` plus the
routes the channel mounts) listens on its private Unix socket; the front's
`RemoteChannel` forwards its routes from a loopback TCP port, like the gateway does.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from gateway.channel_proxy import RemoteChannel
from gateway.channel_socket import PEER_HEADER, channel_app, channel_socket, channels_dir
from gateway.control.server import ControlServer

STATE = {"name": "echo", "state": "running", "error": None, "retry_in": None, "restarts": 2}


class EchoChannel:
    """The routes a channel would mount: echo what arrives; stream on request."""

    def __init__(self) -> None:
        self.go_on = asyncio.Event()

    def mount(self, app: web.Application) -> None:
        app.router.add_route("*", "/echo/stream", self.stream)
        app.router.add_route("*", "/echo{tail:.*}", self.echo)

    async def echo(self, request: web.Request) -> web.Response:
        body: dict[str, Any] = {
            "method": request.method,
            "path_qs": request.path_qs,
            "remote": request.remote,
            "peer_header": request.headers.get(PEER_HEADER),
            "body": (await request.read()).decode(),
            "custom": request.headers.get("X-Custom"),
        }
        return web.json_response(body, status=201, headers={"X-Answer": "yes"})

    async def stream(self, request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        await response.prepare(request)
        await response.write(b"first\n")
        await self.go_on.wait()  # the client must have the first part before this ends
        await response.write(b"second\n")
        await response.write_eof()
        return response


@asynccontextmanager
async def channel_process(home: Path, echo: EchoChannel) -> AsyncIterator[ControlServer]:
    channels_dir(home).mkdir(parents=True, mode=0o700)
    app = channel_app(lambda: STATE)
    echo.mount(app)
    server = ControlServer(app, channel_socket(home, "echo"))
    await server.start()
    try:
        yield server
    finally:
        await server.close()


@asynccontextmanager
async def front(home: Path) -> AsyncIterator[tuple[str, RemoteChannel]]:
    remote = RemoteChannel(home, "echo", ("/echo",))
    app = web.Application()
    remote.mount(app)
    await remote.start()
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    host, port = runner.addresses[0][:2]
    try:
        yield f"http://{host}:{port}", remote
    finally:
        await runner.cleanup()
        await remote.stop()


async def test_forwards_method_path_body_headers_status_and_the_real_peer(tmp_path: Path) -> None:
    echo = EchoChannel()
    async with (
        channel_process(tmp_path, echo),
        front(tmp_path) as (base, _remote),
        aiohttp.ClientSession() as http,
        http.put(
            base + "/echo/a/b?q=1&r=2",
            data=b'{"x": 1}',
            # A client cannot pose as another peer: the front replaces the header.
            headers={PEER_HEADER: "203.0.113.9", "X-Custom": "kept"},
        ) as response,
    ):
        assert response.status == 201
        assert response.headers["X-Answer"] == "yes"
        seen = await response.json()
    assert seen == {
        "method": "PUT",
        "path_qs": "/echo/a/b?q=1&r=2",
        "remote": "127.0.0.1",
        "peer_header": None,  # consumed by the private app, never seen by the channel
        "body": '{"x": 1}',
        "custom": "kept",
    }


async def test_the_private_socket_gives_no_peer_without_the_front(tmp_path: Path) -> None:
    echo = EchoChannel()
    async with channel_process(tmp_path, echo):
        connector = aiohttp.UnixConnector(path=str(channel_socket(tmp_path, "echo")))
        async with (
            aiohttp.ClientSession(connector=connector) as http,
            http.post("http://channel/echo", data=b"hi") as response,
        ):
            seen = await response.json()
    assert seen["remote"] in (None, "")  # not loopback: Teams' anonymous mode refuses it


async def test_streams_an_answer_as_it_comes(tmp_path: Path) -> None:
    echo = EchoChannel()
    async with (
        channel_process(tmp_path, echo),
        front(tmp_path) as (base, _remote),
        aiohttp.ClientSession() as http,
        http.get(base + "/echo/stream") as response,
    ):
        assert await response.content.readline() == b"first\n"
        echo.go_on.set()
        assert await response.content.readline() == b"second\n"


async def test_state_comes_from_the_process_and_down_is_503_and_failed(tmp_path: Path) -> None:
    echo = EchoChannel()
    async with front(tmp_path) as (base, remote):
        async with channel_process(tmp_path, echo):
            await remote.refresh()
            assert remote.as_json() == {**STATE, "process": "channel:echo"}
            assert remote.not_ready() is None
        # The process is gone (its socket too): 503 JSON, and reported down.
        async with aiohttp.ClientSession() as http, http.post(base + "/echo/x") as response:
            assert response.status == 503
            assert await response.json() == {"error": "channel echo is restarting"}
        await remote.refresh()
        assert (remote.state, remote.error) == ("failed", "process down")
        assert remote.not_ready() == "channel echo failed: process down"


async def test_a_process_not_up_yet_is_starting_not_failed(tmp_path: Path) -> None:
    async with front(tmp_path) as (_base, remote):
        (tmp_path / "run").mkdir(exist_ok=True)
        (tmp_path / "run" / "processes.json").write_text(
            '{"supervisor": 1, "processes": [{"name": "channel:echo", "state": "starting"}]}'
        )
        await remote.refresh()
        assert (remote.state, remote.error) == ("starting", None)
