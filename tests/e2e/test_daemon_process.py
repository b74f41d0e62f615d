"""The real daemon as a process: systemd notifications, SIGTERM and SIGKILL mid-turn."""

from __future__ import annotations

import asyncio
import json
import shutil
import signal
import socket
import sqlite3
import sys
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.daemon_env import REPO, daemon_env

pytestmark = pytest.mark.slow

BASE = "http://familiar"


@pytest.fixture
def home() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="fam-", dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@asynccontextmanager
async def fake_openai() -> AsyncIterator[str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.fakes.fake_openai", "--port", "0", "--latency-ms", "300",
        cwd=REPO, env=daemon_env(single=True), stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        line = await asyncio.wait_for(proc.stdout.readline(), 30)
        assert line.startswith(b"PORT "), line
        yield f"http://127.0.0.1:{int(line.split()[1])}/v1"
    finally:
        with suppress(ProcessLookupError):
            proc.terminate()
        await proc.wait()


def write_config(home: Path, base_url: str, *, grace: float = 10.0, lease: float = 60.0) -> None:
    (home / "config.toml").write_text(
        f'[provider]\nkind = "openai"\nbase_url = "{base_url}"\nmodel = "fake-model"\n'
        f'api_key = "sk-test"\n\n[http]\nport = 0\n\n'
        f"[agent]\nshutdown_grace = {grace}\nlease_seconds = {lease}\n"
    )


class ControlSocket:
    """The daemon's control API over ``<home>/run/gateway.sock`` (shared by the e2e rigs)."""

    home: Path

    def _session(self) -> aiohttp.ClientSession:
        connector = aiohttp.UnixConnector(path=str(self.home / "run" / "gateway.sock"))
        return aiohttp.ClientSession(connector=connector)

    async def get(self, path: str) -> Any:
        status, body = await self.fetch(path)
        assert status == 200, body
        return body

    async def fetch(self, path: str) -> tuple[int, Any]:
        """The status and JSON body of a GET, whatever the status."""
        async with self._session() as http, http.get(BASE + path) as response:
            return response.status, await response.json()

    async def submit(self, session: str, text: str) -> str:
        """Send without waiting for the reply: returns the accepted message id."""
        body = {"session": session, "text": text, "stream": False, "timeout": 0.05}
        async with self._session() as http, http.post(BASE + "/v1/messages", json=body) as r:
            assert r.status == 200, await r.text()
            lines = [json.loads(line) async for line in r.content if line.strip()]
        assert lines[0]["type"] == "accepted", lines
        return str(lines[0]["message_id"])


class Daemon(ControlSocket):
    """One spawned ``python -m gateway.daemon --home HOME``."""

    def __init__(self, home: Path, env: dict[str, str]) -> None:
        self.home = home
        self.env = env
        self.proc: asyncio.subprocess.Process | None = None
        self.log = home / "daemon.log"

    async def start(self) -> None:
        with self.log.open("ab") as log:
            self.proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "gateway.daemon", "--home", str(self.home),
                cwd=REPO, env=self.env, stdout=log, stderr=log,
            )  # fmt: skip

    def logs(self) -> str:
        return self.log.read_text(errors="replace")

    async def wait_ready(self) -> None:
        async with asyncio.timeout(60):
            while True:
                assert self.proc is not None and self.proc.returncode is None, self.logs()
                try:
                    await self.get("/v1/status")
                    return
                except (aiohttp.ClientConnectionError, FileNotFoundError):
                    await asyncio.sleep(0.1)

    def signal(self, sig: signal.Signals) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)

    async def wait(self) -> int:
        assert self.proc is not None
        try:
            return await asyncio.wait_for(self.proc.wait(), 60)
        except TimeoutError:
            self.proc.kill()
            await self.proc.wait()
            raise AssertionError("daemon did not exit:\n" + self.logs()) from None

    async def kill(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.kill()
            await self.proc.wait()


@asynccontextmanager
async def daemon(home: Path, **env: str) -> AsyncIterator[Daemon]:
    d = Daemon(home, daemon_env(single=True, **env))
    await d.start()
    try:
        yield d
    finally:
        await d.kill()


async def test_systemd_notify_ready_watchdog_stopping(home: Path) -> None:
    notify_path = home / "notify.sock"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(notify_path))
    sock.setblocking(False)
    loop = asyncio.get_running_loop()
    received: list[str] = []

    async def until(text: str, count: int = 1) -> None:
        async with asyncio.timeout(60):
            while sum(text in m for m in received) < count:
                received.append((await loop.sock_recv(sock, 4096)).decode())

    try:
        async with fake_openai() as base_url:
            write_config(home, base_url)
            env = {"NOTIFY_SOCKET": str(notify_path), "WATCHDOG_USEC": "400000"}
            async with daemon(home, **env) as d:
                await until("READY=1")
                ready = next(m for m in received if "READY=1" in m)
                assert "STATUS=serving" in ready
                assert "provider openai/fake-model" in ready
                before = sum("WATCHDOG=1" in m for m in received)
                await until("WATCHDOG=1", before + 2)
                d.signal(signal.SIGTERM)
                await until("STOPPING=1")
                assert await d.wait() == 0, d.logs()
    finally:
        sock.close()


def _db_rows(home: Path, query: str) -> list[tuple[Any, ...]]:
    with sqlite3.connect(home / "familiar.db") as db:
        return list(db.execute(query).fetchall())


async def _wait_status(d: Daemon, message_id: str, status: str) -> dict[str, Any]:
    while True:
        got: dict[str, Any] = await d.get(f"/v1/messages/{message_id}")
        if got["status"] == status:
            return got
        await asyncio.sleep(0.05)


async def _wait_claimed(d: Daemon, message_id: str) -> None:
    async with asyncio.timeout(60):
        await _wait_status(d, message_id, "claimed")


async def _send_batch(d: Daemon) -> tuple[str, list[str]]:
    slow = await d.submit("cli:a", "!sleep 3 slow one")
    ids = [slow]
    for session, text in [("cli:a", "a2"), ("cli:b", "b1"), ("cli:b", "b2"), ("cli:c", "c1")]:
        ids.append(await d.submit(session, text))
    return slow, ids


async def _check_all_answered_once(d: Daemon, ids: list[str]) -> None:
    try:
        async with asyncio.timeout(60):
            for message_id in ids:
                got = await _wait_status(d, message_id, "done")
                assert got["reply"]["kind"] == "reply", got
                assert got["reply"]["text"].startswith("echo: "), got
    except TimeoutError:
        raise AssertionError("not all messages answered:\n" + d.logs()) from None
    replies = await asyncio.to_thread(
        _db_rows, d.home, "SELECT inbound_id, count(*) FROM outbound GROUP BY inbound_id"
    )
    assert dict(replies) == {message_id: 1 for message_id in ids}
    idles = await asyncio.to_thread(
        _db_rows,
        d.home,
        "SELECT message_id, count(*) FROM events WHERE type = 'session.idle' GROUP BY message_id",
    )
    assert dict(idles) == {message_id: 1 for message_id in ids}
    answers = await asyncio.to_thread(
        _db_rows,
        d.home,
        "SELECT inbound_id, count(*) FROM history WHERE role = 'assistant' GROUP BY inbound_id",
    )
    assert dict(answers) == {message_id: 1 for message_id in ids}


async def test_sigterm_mid_turn_then_restart_answers_everything_once(home: Path) -> None:
    async with fake_openai() as base_url:
        write_config(home, base_url, grace=0.5)
        async with daemon(home) as d:
            await d.wait_ready()
            slow, ids = await _send_batch(d)
            await _wait_claimed(d, slow)
            d.signal(signal.SIGTERM)
            assert await d.wait() == 0, d.logs()
        assert "released unfinished messages" in d.logs()
        async with daemon(home) as d:
            await d.wait_ready()
            await _check_all_answered_once(d, ids)
            d.signal(signal.SIGTERM)
            assert await d.wait() == 0, d.logs()


async def test_sigkill_mid_turn_then_restart_reruns_at_once(home: Path) -> None:
    async with fake_openai() as base_url:
        # A lease far longer than the wait below: only releasing dead owners can pass.
        write_config(home, base_url, lease=600.0)
        async with daemon(home) as d:
            await d.wait_ready()
            slow, ids = await _send_batch(d)
            await _wait_claimed(d, slow)
            await d.kill()
        async with daemon(home) as d:
            await d.wait_ready()
            await _check_all_answered_once(d, ids)
            assert "released leases of dead owners" in d.logs()
            d.signal(signal.SIGTERM)
            assert await d.wait() == 0, d.logs()
