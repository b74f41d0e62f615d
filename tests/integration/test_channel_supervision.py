"""Plugin channels in the real daemon: a failed start is retried, not fatal; readiness."""

from __future__ import annotations

import asyncio
import importlib.metadata
import json
import re
import shutil
import socket
import time
from collections.abc import AsyncIterator, Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import aiohttp
import pytest
from click.testing import CliRunner, Result

from core.bus.sql import SqlBus
from core.messages import Delivery, InboundMessage
from core.store.engine import Store
from gateway.cli import app
from gateway.daemon import EX_CONFIG, serve
from gateway.plugins import CHANNELS_GROUP
from tests.conftest import short_home
from tests.fakes.fake_platform import FakePlatform
from tests.waiting import eventually

T = TypeVar("T")
TOKEN = "xoxb-loop-secret-0123456789abcdef"
LOOP = [
    importlib.metadata.EntryPoint(
        name="loop", value="tests.fakes.fake_platform:plugin", group=CHANNELS_GROUP
    )
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def home() -> Iterator[Path]:
    path = short_home()
    (path / "config.toml").write_text('[provider]\nkind = "scripted"\n')
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(autouse=True)
def _restore_logging(restore_root_logging: None) -> None:
    """Every test here runs the daemon in-process."""


def loop_overrides(platform: FakePlatform, port: int = 0, **table: Any) -> dict[str, Any]:
    loop = {"enabled": True, "url": platform.url, "token": TOKEN, **table}
    return {"http": {"port": port}, "channels": {"loop": loop}}


@asynccontextmanager
async def gateway(
    home: Path, overrides: dict[str, Any]
) -> AsyncIterator[tuple[aiohttp.ClientSession, asyncio.Task[int]]]:
    """The daemon in-process with the ``loop`` plugin, and a client on its control socket."""
    stop = asyncio.Event()
    task = asyncio.create_task(
        serve(home, stop=stop, env={}, config_overrides=overrides, entry_points=LOOP)
    )
    connector = aiohttp.UnixConnector(path=str(home / "run" / "gateway.sock"))
    try:
        async with aiohttp.ClientSession("http://familiar", connector=connector) as control:
            yield control, task
    finally:
        stop.set()
        code = await asyncio.wait_for(task, 30)
    assert code == 0


async def status(control: aiohttp.ClientSession, task: asyncio.Task[int]) -> dict[str, Any]:
    async with asyncio.timeout(30):
        while True:
            assert not task.done(), f"gateway exited with {task.result()}"
            try:
                async with control.get("/v1/status") as response:
                    result: dict[str, Any] = await response.json()
                    return result
            except aiohttp.ClientConnectionError:
                await asyncio.sleep(0.05)


def familiar(*args: str) -> Result:
    return CliRunner().invoke(app, list(args), catch_exceptions=False)


def channel(report: dict[str, Any], name: str) -> dict[str, Any]:
    return next(c for c in report["channels"] if c["name"] == name)


async def readyz(address: str) -> tuple[int, dict[str, Any]]:
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"http://{address}/readyz") as response,
    ):
        return response.status, await response.json()


async def publish_for_loop(home: Path, text: str) -> str:
    """A message from the loop platform, published as another process would."""
    store = Store(url=f"sqlite+aiosqlite:///{home / 'familiar.db'}")
    await store.open(migrate=False)
    try:
        message = InboundMessage(
            session_key="loop:room1",
            text=text,
            delivery=Delivery(channel="loop", chat_id="room1"),
        )
        await SqlBus(store=store).publish_inbound(message)
    finally:
        await store.close()
    return message.id


async def test_a_channel_that_cannot_start_is_retried_while_the_gateway_serves(
    home: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    async with (
        FakePlatform(token=TOKEN) as platform,
        gateway(home, loop_overrides(platform)) as (control, task),
    ):
        report = await status(control, task)
        assert channel(report, "cli")["state"] == "running"
        loop = channel(report, "loop")
        assert loop["state"] in ("failed", "starting"), loop
        async with asyncio.timeout(30):
            # The control socket answers before the HTTP port listens (``http`` is null).
            while True:
                report = await status(control, task)
                loop = channel(report, "loop")
                if loop["state"] == "failed" and report["http"] is not None:
                    break
                await asyncio.sleep(0.02)
        assert "answered 503" in loop["error"]
        assert TOKEN not in json.dumps(report)

        code, body = await readyz(report["http"])
        assert code == 503
        [reason] = [r for r in body["reasons"] if r.startswith("channel loop")]
        assert reason.startswith("channel loop failed: ") and "503" in reason
        assert TOKEN not in reason

        # One at a time: CliRunner swaps sys.stdout.
        doctor = await asyncio.to_thread(familiar, "doctor", "--home", str(home))
        shown = await asyncio.to_thread(familiar, "status", "--home", str(home))
        assert doctor.exit_code == 1
        assert "✗ channel loop running: failed: " in doctor.stdout
        assert "✓ channel cli running" in doctor.stdout
        assert "channel loop" in shown.stdout and "failed" in shown.stdout
        assert TOKEN not in doctor.stdout + shown.stdout

        # The CLI channel serves meanwhile, and the loop's reply waits durably.
        async with control.post(
            "/v1/messages", json={"session": "cli:x", "text": "hi", "stream": False}
        ) as response:
            lines = [json.loads(line) async for line in response.content if line.strip()]
        assert lines[-1]["text"] == "echo: hi"
        message_id = await publish_for_loop(home, "are you there?")
        async with asyncio.timeout(30):
            while True:
                async with control.get(f"/v1/messages/{message_id}") as response:
                    if (await response.json())["status"] == "done":
                        break
                await asyncio.sleep(0.05)
        assert platform.requests == []

        platform.accepting = True
        async with asyncio.timeout(30):
            while not platform.requests:
                await asyncio.sleep(0.05)
        assert platform.requests == [{"chat": "room1", "text": "echo: are you there?"}]
        loop = channel(await status(control, task), "loop")
        assert loop["state"] == "running" and loop["error"] is None
        assert loop["retry_in"] is None and loop["restarts"] == platform.refused
        assert platform.refused >= 1
        assert await readyz(report["http"]) == (200, {"status": "ready"})
    err = capfd.readouterr().err
    assert "channel loop failed to start" in err
    assert TOKEN not in err


async def test_retries_back_off(home: Path, capfd: pytest.CaptureFixture[str]) -> None:
    async with (
        FakePlatform(token=TOKEN) as platform,
        gateway(home, loop_overrides(platform)) as (control, task),
    ):

        async def retried_twice() -> bool:
            loop = channel(await status(control, task), "loop")
            planned = loop["retry_in"] is not None
            return loop["state"] == "failed" and loop["restarts"] >= 2 and planned

        await eventually(retried_twice, what="two retries failed, a third is planned")
        loop = channel(await status(control, task), "loop")
        # the next attempt is seconds away (see below): nothing moves meanwhile
        assert loop["restarts"] == 2 and platform.refused == 3
    # Each wait is planned (and logged) before it is slept: 1 s, 2 s, 4 s, each with
    # jitter down to half; the platform saw the attempts at least that far apart.
    err = capfd.readouterr().err
    planned = [float(s) for s in re.findall(r"channel loop: next start attempt in ([\d.]+)s", err)]
    assert len(planned) >= 3, err
    for wait, (low, high) in zip(planned, [(0.5, 1.0), (1.0, 2.0), (2.0, 4.0)], strict=False):
        assert low <= wait <= high, planned
    first, second, third = platform.refused_at[:3]
    assert second - first >= planned[0] - 0.05  # (logged to 0.1 s)
    assert third - second >= planned[1] - 0.05
    assert 0 < loop["retry_in"] <= planned[2]


@pytest.mark.parametrize(
    ("table", "key"),
    [({"tokn": "x"}, "channels.loop.tokn"), ({"fail_create": True}, "channels.loop")],
)
async def test_an_invalid_channel_config_still_exits_78(
    home: Path, table: dict[str, Any], key: str, capfd: pytest.CaptureFixture[str]
) -> None:
    overrides = {"channels": {"loop": {"enabled": True, **table}}}
    code = await serve(
        home, stop=asyncio.Event(), env={}, config_overrides=overrides, entry_points=LOOP
    )
    assert code == EX_CONFIG
    assert key in capfd.readouterr().err


class _SlowExecutor(ThreadPoolExecutor):
    """Runs every job 0.2 s late."""

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        def late() -> T:
            time.sleep(0.2)
            return fn(*args, **kwargs)

        return super().submit(late)


async def test_ready_only_once_every_listener_accepts(home: Path) -> None:
    """/readyz never says ready while the control socket does not yet accept connections."""
    # The control socket's start hops through the default executor: when every hop
    # takes a while, any window between the two listeners is wide open.
    asyncio.get_running_loop().set_default_executor(_SlowExecutor(max_workers=4))
    port = _free_port()
    socket_path = home / "run" / "gateway.sock"
    async with (
        FakePlatform(token=TOKEN, accepting=True) as platform,
        aiohttp.ClientSession() as http,
    ):
        stop = asyncio.Event()
        overrides = loop_overrides(platform, port)
        task = asyncio.create_task(
            serve(home, stop=stop, env={}, config_overrides=overrides, entry_points=LOOP)
        )
        seen: list[int] = []
        try:
            async with asyncio.timeout(30):
                while True:
                    assert not task.done(), task.result()
                    try:
                        async with http.get(f"http://127.0.0.1:{port}/readyz") as response:
                            seen.append(response.status)
                            ready = response.status == 200
                    except aiohttp.ClientConnectionError:
                        ready = False
                    if ready:
                        # The moment it says ready, the control socket must accept.
                        _, writer = await asyncio.open_unix_connection(str(socket_path))
                        writer.close()
                        await writer.wait_closed()
                        break
                    await asyncio.sleep(0)
        finally:
            stop.set()
            assert await asyncio.wait_for(task, 30) == 0
    assert seen[-1] == 200
