"""The gateway daemon in-process: control socket, HTTP probes, metrics, lock, first start."""

from __future__ import annotations

import asyncio
import json
import re
import socket
import tomllib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from pydantic import SecretStr

from core.agent.services import NO_PROVIDER_HINT
from core.bus.sql import SqlBus
from core.messages import Delivery, InboundMessage, OutboundMessage
from core.providers.config import ProviderConfig
from core.store.engine import Store
from gateway.config import FamiliarConfig, config_model, load_config
from gateway.daemon import EX_CONFIG, serve
from gateway.init import init_home, render_default_config
from gateway.masking import MASK, masked_config
from gateway.plugins import discover_channels
from gateway.provider_detect import choose_provider, detect_provider
from tests.fakes.fake_openai import FakeOpenAI

SECRET = "sk-test-do-not-leak-7f3a9c"
BASE = "http://familiar"


def _closed_port_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


@pytest.fixture
def home(daemon_home: Path) -> Path:
    return daemon_home


@pytest.fixture(autouse=True)
def _restore_logging(restore_root_logging: None) -> None:
    """Every test here runs the daemon in-process."""


def write_config(home: Path, fake: FakeOpenAI | None, extra: str = "") -> None:
    provider = ""
    if fake is not None:
        provider = (
            f'[provider]\nkind = "openai"\nbase_url = "{fake.base_url}"\n'
            f'model = "fake-model"\napi_key = "{SECRET}"\nmax_retries = 0\n'
        )
    text = f"{provider}\n[http]\nport = 0\n\n[agent]\nshutdown_grace = 2.0\n{extra}"
    (home / "config.toml").write_text(text)


@dataclass
class Gateway:
    http: aiohttp.ClientSession
    task: asyncio.Task[int]

    async def get(self, path: str, status: int = 200) -> Any:
        async with self.http.get(BASE + path) as response:
            body = await response.json()
            assert response.status == status, body
            return body

    async def send(
        self, text: str, session: str = "cli:test", **extra: Any
    ) -> list[dict[str, Any]]:
        body = {"session": session, "text": text, "timeout": 30, **extra}
        async with self.http.post(BASE + "/v1/messages", json=body) as response:
            assert response.status == 200, await response.text()
            assert response.content_type == "application/x-ndjson"
            return [json.loads(line) async for line in response.content if line.strip()]

    async def post_raw(self, body: Any) -> tuple[int, dict[str, Any]]:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        async with self.http.post(BASE + "/v1/messages", data=data) as response:
            return response.status, await response.json()


@asynccontextmanager
async def running(home: Path, *, overrides: dict[str, Any] | None = None) -> AsyncIterator[Gateway]:
    stop = asyncio.Event()
    task = asyncio.create_task(
        serve(home, stop=stop, env={}, ollama_url=_closed_port_url(), config_overrides=overrides)
    )
    http_off = (overrides or {}).get("http", {}).get("enabled") is False
    connector = aiohttp.UnixConnector(path=str(home / "run" / "gateway.sock"))
    async with aiohttp.ClientSession(connector=connector) as http:
        gateway = Gateway(http, task)
        async with asyncio.timeout(30):
            while True:
                assert not task.done(), f"gateway exited early with {task.result()}"
                try:  # HTTP (when on) listens just after the control socket
                    status = await gateway.get("/v1/status")
                    if status["http"] or http_off:
                        break
                except aiohttp.ClientConnectionError:
                    pass
                await asyncio.sleep(0.05)
        try:
            yield gateway
        finally:
            stop.set()
            assert await asyncio.wait_for(task, 30) == 0


async def test_control_api_end_to_end(home: Path, capfd: pytest.CaptureFixture[str]) -> None:
    async with FakeOpenAI(latency=0.05) as fake:
        write_config(home, fake)
        async with running(home) as gw:
            status = await gw.get("/v1/status")
            assert status["home"] == str(home)
            assert status["store"] == "sqlite"
            assert status["provider"] == {
                "kind": "openai",
                "model": "fake-model",
                "base_url": fake.base_url,
            }
            assert {
                "name": "cli",
                "state": "running",
                "error": None,
                "retry_in": None,
                "restarts": 0,
                "failed_deliveries": 0,
                "last_failed_delivery": None,
            } in status["channels"]
            assert status["queue"] == {"pending": 0, "claimed": 0}
            assert re.fullmatch(r"127\.0\.0\.1:\d+", status["http"])

            lines = await gw.send("hello there", session="cli:t1")
            assert lines[0]["type"] == "accepted" and lines[0]["session"] == "cli:t1"
            message_id = lines[0]["message_id"]
            deltas = [line["text"] for line in lines if line["type"] == "delta"]
            assert deltas, lines
            final = lines[-1]
            assert final == {
                "type": "reply",
                "message_id": message_id,
                "session": "cli:t1",
                "kind": "reply",
                "text": "echo: hello there",
                "format": "markdown",
            }
            assert "".join(deltas) == final["text"]

            got = await gw.get(f"/v1/messages/{message_id}")
            assert got == {
                "message_id": message_id,
                "session": "cli:t1",
                "status": "done",
                "reply": {"kind": "reply", "text": "echo: hello there"},
            }
            await gw.get("/v1/messages/nope", status=404)

            quiet = await gw.send("no stream please", session="cli:t2", stream=False)
            assert [line["type"] for line in quiet] == ["accepted", "reply"]

            tool = await gw.send('!tool list_dir {"path": "."}', session="cli:t1")
            assert any(line["type"] == "progress" for line in tool), tool
            assert tool[-1]["type"] == "reply" and tool[-1]["text"].startswith("tool said:")

            slow = await gw.send("!sleep 1.5 late", session="cli:t3", timeout=0.2)
            assert slow[-1] == {
                "type": "timeout",
                "message_id": slow[0]["message_id"],
                "session": "cli:t3",
                "reason": "timeout",
            }
            async with asyncio.timeout(30):
                while True:
                    late = await gw.get(f"/v1/messages/{slow[0]['message_id']}")
                    if late["status"] == "done":
                        break
                    await asyncio.sleep(0.05)
            assert late["reply"]["text"] == "echo: !sleep 1.5 late"

            listed = await gw.get("/v1/sessions")
            keys = {s["key"] for s in listed["sessions"]}
            assert {"cli:t1", "cli:t2", "cli:t3"} <= keys
            shown = await gw.get("/v1/sessions/cli:t1?events=1")
            assert shown["session"]["key"] == "cli:t1"
            assert [h["role"] for h in shown["history"]][:2] == ["user", "assistant"]
            types = [e["type"] for e in shown["events"]]
            assert "user.message" in types and "tool.execution_start" in types
            assert (await gw.get("/v1/sessions/cli:t1"))["events"] == []
            await gw.get("/v1/sessions/cli:nobody", status=404)

            config = await gw.get("/v1/config")
            assert config["provider"]["api_key"] == MASK
            assert config["http"]["port"] == 0
            assert config["store"]["url"].endswith("familiar.db")

            await check_http(status["http"])

            async with gw.http.get(BASE + "/v1/config") as response:
                assert SECRET not in await response.text()
    captured = capfd.readouterr()
    assert "provider: kind=openai" in captured.err
    assert SECRET not in captured.err + captured.out


async def check_http(address: str) -> None:
    async with aiohttp.ClientSession(f"http://{address}") as http:
        async with http.get("/healthz") as response:
            assert response.status == 200
            assert await response.json() == {"status": "ok"}
        async with http.get("/readyz") as response:
            assert response.status == 200, await response.text()
        async with http.get("/metrics") as response:
            assert response.status == 200
            text = await response.text()
    metrics = parse_metrics(text)
    assert metrics['familiar_messages_in_total{channel="cli"}'] >= 4
    assert metrics['familiar_messages_out_total{channel="cli",kind="reply"}'] >= 3
    assert metrics["familiar_turns_total"] >= 5
    assert metrics['familiar_tool_calls_total{tool="list_dir"}'] == 1
    assert metrics["familiar_llm_latency_seconds_count"] >= 5
    assert metrics["familiar_queue_depth"] == 0


def parse_metrics(text: str) -> dict[str, float]:
    values: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            values[name] = float(value)
    return values


async def test_bad_requests_get_clear_400s(home: Path) -> None:
    write_config(home, None, '\n[provider]\nkind = "scripted"\n')
    async with running(home) as gw:
        cases: list[tuple[Any, str]] = [
            (b"{not json", "JSON"),
            ([1, 2], "object"),
            ({"session": "cli:x"}, "text is required"),
            ({"session": "cli:x", "text": "   "}, "empty"),
            ({"session": "cli:x", "text": 3}, "text must be a string"),
            ({"session": "slack:x", "text": "hi"}, "cli:NAME"),
            ({"session": "cli:bad name", "text": "hi"}, "session name"),
            ({"session": "cli:" + "x" * 200, "text": "hi"}, "session name"),
            ({"session": 7, "text": "hi"}, "session must be a string"),
            ({"session": "cli:x", "text": "hi", "stream": "yes"}, "stream"),
            ({"session": "cli:x", "text": "hi", "timeout": -1}, "timeout"),
            ({"session": "cli:x", "text": "hi", "timeout": "5"}, "timeout"),
        ]
        for body, expected in cases:
            status, answer = await gw.post_raw(body)
            assert status == 400, (body, answer)
            assert expected in answer["error"], (body, answer)
        async with gw.http.get(BASE + "/v1/nothing") as response:
            assert response.status == 404
            assert "error" in await response.json()
        # scripted provider, no stream subscriber needed: a default session works
        lines = await gw.send("hi", session="cli:default", stream=False)
        assert lines[-1]["text"] == "echo: hi"


async def test_first_start_writes_config_and_hints_without_provider(
    home: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    assert not (home / "config.toml").exists()
    async with running(home, overrides={"http": {"port": 0}}) as gw:
        status = await gw.get("/v1/status")
        assert status["provider"] is None
        lines = await gw.send("anyone there?")
        assert lines[-1]["kind"] == "error"
        assert lines[-1]["text"] == NO_PROVIDER_HINT
        message = await gw.get(f"/v1/messages/{lines[0]['message_id']}")
        assert message["status"] == "failed"
    assert (home / "workspace" / "AGENTS.md").exists()
    assert (home / "run").stat().st_mode & 0o777 == 0o700
    written = (home / "config.toml").read_text()
    assert written == render_default_config()
    installed = config_model(discover_channels())
    assert load_config(home).model_dump() == installed().model_dump()
    assert "provider: none" in capfd.readouterr().err


async def test_second_gateway_on_the_same_home_is_refused(
    home: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    write_config(home, None)
    async with running(home) as gw:
        status = await gw.get("/v1/status")
        code = await asyncio.wait_for(serve(home, stop=asyncio.Event(), env={}), 30)
        assert code == 1
        err = capfd.readouterr().err
        assert f"another familiar gateway (pid {status['pid']}) is already running on {home}" in err
        # the first one still serves
        assert (await gw.get("/v1/status"))["pid"] == status["pid"]
        assert (home / "run" / "gateway.sock").stat().st_mode & 0o777 == 0o600
    assert not (home / "run" / "gateway.sock").exists()


async def test_invalid_config_exits_78(home: Path, capfd: pytest.CaptureFixture[str]) -> None:
    (home / "config.toml").write_text('[agent]\nmax_iterations = "many"\n')
    assert await serve(home, stop=asyncio.Event(), env={}) == EX_CONFIG
    assert "agent.max_iterations" in capfd.readouterr().err


async def test_restart_answers_messages_left_pending(home: Path) -> None:
    write_config(home, None, '\n[provider]\nkind = "scripted"\n')
    async with running(home) as gw:
        first = await gw.send("one", stream=False)
    async with running(home) as gw:
        got = await gw.get(f"/v1/messages/{first[0]['message_id']}")
        assert got["reply"] == {"kind": "reply", "text": "echo: one"}


def test_default_config_uncommented_equals_defaults(tmp_path: Path) -> None:
    text = render_default_config()
    tomllib.loads(text)  # as written (all commented) it parses
    uncommented = []
    in_value = False
    for line in text.splitlines():
        assignment = re.match(r"# ([a-z_]+) = (.*)", line)
        if re.fullmatch(r"# \[[\w.\"-]+\]", line):  # a section header
            uncommented.append(line[2:])
        elif assignment and "(not set)" not in line:
            uncommented.append(line[2:])
            in_value = assignment.group(2) == "["
        elif in_value:
            uncommented.append(line[2:])
            in_value = line != "# ]"
        else:
            uncommented.append(line)
    (tmp_path / "config.toml").write_text("\n".join(uncommented))
    installed = config_model(discover_channels())
    assert load_config(tmp_path).model_dump() == installed().model_dump()


def test_init_home_never_overwrites(tmp_path: Path) -> None:
    created = init_home(tmp_path)
    assert any("config.toml" in line for line in created)
    (tmp_path / "config.toml").write_text("# mine\n")
    assert init_home(tmp_path) == []
    assert (tmp_path / "config.toml").read_text() == "# mine\n"


# -- pieces: the CLI channel, provider detection, masking ---------------------------------


def _reply(inbound_id: str, text: str = "hi") -> OutboundMessage:
    return OutboundMessage(
        id=f"{inbound_id}.reply",
        inbound_id=inbound_id,
        session_key="cli:x",
        delivery=Delivery(channel="cli", chat_id="x"),
        text=text,
    )


async def test_provider_detection() -> None:
    closed = _closed_port_url()
    base = ProviderConfig(timeout_read=33.0)
    openai = await detect_provider(base, {"OPENAI_API_KEY": "sk-a"}, ollama_url=closed)
    assert openai is not None and openai.config.kind == "openai"
    assert openai.config.timeout_read == 33.0 and openai.source == "OPENAI_API_KEY"
    anthropic = await detect_provider(base, {"ANTHROPIC_API_KEY": "k"}, ollama_url=closed)
    assert anthropic is not None and anthropic.config.kind == "anthropic"
    assert await detect_provider(base, {}, ollama_url=closed) is None

    app = web.Application()

    async def tags(_request: web.Request) -> web.Response:
        return web.json_response({"models": [{"name": "llama3.2:latest"}, {"name": "qwen"}]})

    app.router.add_get("/api/tags", tags)
    async with TestServer(app, host="127.0.0.1") as server:
        url = f"http://127.0.0.1:{server.port}"
        ollama = await detect_provider(base, {}, ollama_url=url)
    assert ollama is not None and ollama.source == "ollama"
    assert ollama.as_json() == {
        "kind": "openai",
        "model": "llama3.2:latest",
        "base_url": f"{url}/v1",
    }
    configured = ProviderConfig(kind="scripted")
    chosen = await choose_provider(configured, {"OPENAI_API_KEY": "x"}, ollama_url=closed)
    assert chosen is not None and chosen.source == "config" and chosen.config.kind == "scripted"


def test_masked_config_hides_every_secret() -> None:
    config = FamiliarConfig(provider=ProviderConfig(kind="openai", api_key=SecretStr(SECRET)))
    masked = masked_config(
        config, store_url="postgresql+asyncpg://me:hunter2@db/familiar", workspace=Path("/w")
    )
    text = json.dumps(masked)
    assert SECRET not in text and "hunter2" not in text
    assert masked["store"]["url"] == f"postgresql+asyncpg://me:{MASK}@db/familiar"
    assert masked["workspace"] == "/w"


async def test_watch_streams_replies_nobody_waits_for(home: Path) -> None:
    """What `familiar chat` shows between turns: e.g. the reply to a schedule firing."""
    write_config(home, None, '\n[provider]\nkind = "scripted"\n')
    async with running(home) as gw:
        async with gw.http.get(BASE + "/v1/watch/cli:watched") as watch:
            assert watch.status == 200
            # Someone else (here: a second publisher on the same store, as the
            # scheduler is) puts a message on the session; no sender waits for it.
            store = Store(url=f"sqlite+aiosqlite:///{home / 'familiar.db'}")
            await store.open(migrate=False)
            fired = InboundMessage(
                session_key="cli:watched",
                text="ping from a schedule",
                delivery=Delivery(channel="cli", chat_id="watched"),
                origin="schedule",
            )
            try:
                await SqlBus(store=store).publish_inbound(fired)
            finally:
                await store.close()
            async with asyncio.timeout(20):
                line = await watch.content.readline()
        assert json.loads(line) == {
            "type": "reply",
            "message_id": fired.id,
            "session": "cli:watched",
            "kind": "reply",
            "text": "echo: ping from a schedule",
            "format": "markdown",
        }
        body = await gw.get("/v1/watch/not-a-cli-key", status=400)
        assert "error" in body
