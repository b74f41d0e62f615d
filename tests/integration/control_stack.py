"""The real control server in-process: core, CLI channel, its delivery worker, the socket.

What the daemon wires for the CLI, without the rest of the daemon, so tests can drive
the real ``familiar`` commands and ``ControlClient`` against the real server.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from aiohttp import web

from channels.base import ChannelContext
from channels.cli import CliChannel
from core.agent.config import AgentConfig
from core.app import CoreApp, build_core
from core.bus.delivery import DeliveryWorker
from core.errors import ProviderError
from core.providers.base import ChatRequest, Completion, ToolCall
from core.providers.config import ProviderConfig
from core.providers.scripted import Reply, ScriptedProvider
from core.tools.config import ToolsConfig
from gateway.config import FamiliarConfig
from gateway.control.client import socket_path
from gateway.control.schedules import add_schedule_routes
from gateway.control.server import ControlServer, ControlState, build_control_app
from gateway.provider_detect import ProviderChoice

UPTIME = 3725.0
"""The uptime the stack reports at start (1h 2m 5s)."""


class Script:
    """The scripted LLM of these tests, by the text of the last user message.

    ``!fail`` -> a provider error; ``!hang`` -> never answers; ``!gate`` -> answers once
    `gate` is set; ``!tool`` -> calls ``list_dir`` first; anything else -> ``echo: TEXT``.
    """

    def __init__(self) -> None:
        self.gate = asyncio.Event()

    async def __call__(self, request: ChatRequest) -> Reply:
        last = request.messages[-1]
        if last.role == "tool":
            return "listed"
        text = last.content
        if text.startswith("!fail"):
            raise ProviderError("provider failed", status=400)
        if text.startswith("!hang"):
            await asyncio.Event().wait()
        if text.startswith("!gate"):
            await self.gate.wait()
        if text.startswith("!tool"):
            call = ToolCall(id="c1", name="list_dir", arguments={"path": "."})
            return Completion(tool_calls=(call,), finish_reason="tool_calls")
        return f"echo: {text}"


@dataclass
class ControlStack:
    home: Path
    core: CoreApp
    cli: CliChannel
    script: Script
    server: ControlServer


@asynccontextmanager
async def control_stack(
    home: Path, *, more_routes: Callable[[web.Application, CoreApp], None] | None = None
) -> AsyncIterator[ControlStack]:
    """Serve the real control API of a fresh core on ``<home>/run/gateway.sock``
    (``more_routes(app, core)`` adds routes the gateway adds beside it)."""
    store_url = f"sqlite+aiosqlite:///{home / 'familiar.db'}"
    script = Script()
    core = await build_core(
        store_url=store_url,
        workspace=home / "workspace",
        agent=AgentConfig(),
        tools=ToolsConfig(),
        provider=ScriptedProvider(fn=script),
    )
    cli = CliChannel()
    await cli.start(ChannelContext(bus=core.bus, hub=core.hub, unread=core.sessions))
    worker = DeliveryWorker(bus=core.bus, channel="cli", send=cli.send)
    worker.start()
    await core.start()
    state = ControlState(
        home=home,
        workspace=home / "workspace",
        config=FamiliarConfig(),
        core=core,
        cli=cli,
        provider=ProviderChoice(config=ProviderConfig(kind="scripted"), source="config"),
        version="0.0.test",
        store_url=store_url,
        channels=lambda: [{"name": "cli", "state": "running"}],
        started=time.monotonic() - UPTIME,
    )
    extra: list[Callable[[web.Application], None]] = [
        lambda app: add_schedule_routes(app, core.schedules)
    ]
    if more_routes is not None:
        extra.append(lambda app: more_routes(app, core))
    app = build_control_app(state, extra_routes=extra)
    path = socket_path(home)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    server = ControlServer(app, path, shutdown_timeout=1.0)
    await server.start()
    try:
        yield ControlStack(home=home, core=core, cli=cli, script=script, server=server)
    finally:
        script.gate.set()
        await cli.stop()
        await server.close()
        await worker.stop()
        await core.stop(grace=1)


class Relay:
    """A Unix-socket relay in front of the control socket that records each request.

    With ``cut_first``, the first POST is forwarded, and once the server starts to
    answer both connections are closed: the client sees the connection break before
    ``accepted`` although the server stored the message.
    """

    def __init__(self, upstream: Path, path: Path, *, cut_first: bool = False) -> None:
        self.upstream = upstream
        self.path = path
        self.cut_first = cut_first
        self.posts: list[bytes] = []
        """Bodies of the POST requests, in order."""
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._server = await asyncio.start_unix_server(self._serve, path=str(self.path))

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_unix_connection(str(self.upstream))
        back = asyncio.ensure_future(self._pipe(up_reader, writer))
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                body = await reader.readexactly(length)
                if head.startswith(b"POST"):
                    self.posts.append(body)
                    if self.cut_first and len(self.posts) == 1:
                        back.cancel()
                        up_writer.write(head + body)
                        await up_reader.read(1)  # the server has started to answer
                        return
                up_writer.write(head + body)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            back.cancel()
            for w in (writer, up_writer):
                w.close()

    @staticmethod
    async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while chunk := await reader.read(65536):
                writer.write(chunk)
                await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()
