"""The in-process daemon under faults: a stop while senders wait, exposed HTTP, bad bodies."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from gateway.control.client import ControlClient
from gateway.control.conversation import Outcome, converse, no_reply_text
from gateway.control.protocol import TimeoutLine
from gateway.daemon import serve
from tests.fakes.fake_openai import FakeOpenAI
from tests.integration.test_daemon import _closed_port_url, write_config
from tests.waiting import eventually


@pytest.fixture
def home(daemon_home: Path) -> Path:
    return daemon_home


@pytest.fixture(autouse=True)
def _restore_logging(restore_root_logging: None) -> None:
    """Tests here run the daemon in-process."""


async def _until_serving(home: Path, task: asyncio.Task[int]) -> None:
    async def answers() -> bool:
        assert not task.done(), f"gateway exited early with {task.result()}"
        try:
            async with ControlClient(home, connect_timeout=1.0) as client:
                status = await client.status()
        except Exception:  # not up yet, whatever the reason
            return False
        return bool(status["http"])  # HTTP listens last, after the control socket

    await eventually(answers, what="the gateway answering on both sockets", timeout=30)


async def test_stop_tells_waiting_senders_the_message_stays_queued(home: Path) -> None:
    async with FakeOpenAI() as fake:
        write_config(home, fake)  # agent.shutdown_grace = 2 s
        stop = asyncio.Event()
        task = asyncio.create_task(serve(home, stop=stop, env={}, ollama_url=_closed_port_url()))
        await _until_serving(home, task)
        async with ControlClient(home) as client:
            talk = asyncio.ensure_future(
                converse(client, "cli:stopping", "!sleep 30", stream=False, wait=300.0)
            )
            await eventually(lambda: bool(fake.log), what="the LLM call", timeout=30)
            stop.set()
            outcome: Outcome = await asyncio.wait_for(talk, 30)
        assert await asyncio.wait_for(task, 30) == 0

    assert isinstance(outcome.final, TimeoutLine)
    assert outcome.final.reason == "stopping"
    assert outcome.status == "queued"  # `familiar send` exits 1 on it
    assert no_reply_text(outcome, "cli:stopping", 300.0) == (
        f"the gateway is stopping; message {outcome.message_id} stays queued and will be "
        "answered after it restarts (see: familiar sessions show cli:stopping --events)"
    )


async def test_exposed_http_host_is_warned_about(
    home: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    write_config(home, None, '\n[provider]\nkind = "scripted"\n')
    stop = asyncio.Event()
    overrides = {"http": {"host": "0.0.0.0", "port": 0}}
    task = asyncio.create_task(
        serve(home, stop=stop, env={}, ollama_url=_closed_port_url(), config_overrides=overrides)
    )
    try:
        await _until_serving(home, task)
        async with ControlClient(home) as client:
            port = (await client.status())["http"].rsplit(":", 1)[1]
    finally:
        stop.set()
        assert await asyncio.wait_for(task, 30) == 0
    err = capfd.readouterr().err
    warnings = [line for line in err.splitlines() if "http.host is 0.0.0.0" in line]
    assert len(warnings) == 1, err
    assert '"level": "warning"' in warnings[0]
    assert "/metrics" in warnings[0] and f"on port {port};" in warnings[0]


async def test_loopback_http_host_is_not_warned_about(
    home: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    write_config(home, None, '\n[provider]\nkind = "scripted"\n')
    stop = asyncio.Event()
    task = asyncio.create_task(serve(home, stop=stop, env={}, ollama_url=_closed_port_url()))
    try:
        await _until_serving(home, task)
    finally:
        stop.set()
        assert await asyncio.wait_for(task, 30) == 0
    assert "http.host is" not in capfd.readouterr().err
