"""The three roles of the gateway in one test process: each `serve(role=...)` is what a
role process runs, with its own store connections, hub and wake-up socket; they share
only the home (database, control socket, wake-up directory)."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from gateway.daemon import Role, serve
from tests.fakes.fake_openai import FakeOpenAI
from tests.waiting import eventually

BASE = "http://familiar"


@pytest.fixture(autouse=True)
def _restore_logging(restore_root_logging: None) -> None:
    """Every test here runs the daemon in-process."""


def _closed_port_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


@asynccontextmanager
async def role(home: Path, name: Role) -> AsyncIterator[asyncio.Task[int]]:
    stop = asyncio.Event()
    task = asyncio.create_task(
        serve(home, stop=stop, env={}, ollama_url=_closed_port_url(), role=name)
    )
    try:
        yield task
    finally:
        stop.set()
        assert await asyncio.wait_for(task, 60) == 0


class Front:
    def __init__(self, http: aiohttp.ClientSession) -> None:
        self.http = http

    async def get(self, path: str) -> Any:
        async with self.http.get(BASE + path) as response:
            assert response.status == 200, await response.text()
            return await response.json()

    async def post(self, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        async with self.http.post(BASE + path, json=body) as response:
            if response.content_type == "application/x-ndjson":
                return response.status, [
                    json.loads(line) async for line in response.content if line.strip()
                ]
            return response.status, await response.json()


async def test_three_roles_share_one_home(daemon_home: Path) -> None:
    home = daemon_home
    async with FakeOpenAI(latency=0.05) as fake:
        (home / "config.toml").write_text(
            f'[provider]\nkind = "openai"\nbase_url = "{fake.base_url}"\n'
            'model = "fake-model"\napi_key = "sk-test"\nmax_retries = 0\n\n'
            "[http]\nport = 0\n\n[agent]\nshutdown_grace = 2.0\n\n"
            "[scheduler]\nleader_lease = 3\n"
        )
        connector = aiohttp.UnixConnector(path=str(home / "run" / "gateway.sock"))
        async with AsyncExitStack() as stack:
            channels = await stack.enter_async_context(role(home, "channels"))
            http = await stack.enter_async_context(aiohttp.ClientSession(connector=connector))
            front = Front(http)

            async def answers() -> bool:
                assert not channels.done(), channels.result()
                try:
                    await front.get("/v1/status")
                except aiohttp.ClientConnectionError:
                    return False
                return True

            await eventually(answers, timeout=60, what="the channels role serves")
            # Accepted before any agent runs: kept until one does.
            status, early = await front.post(
                "/v1/messages", {"session": "cli:early", "text": "queued", "timeout": 0.05}
            )
            assert status == 200 and early[0]["type"] == "accepted"
            await stack.enter_async_context(role(home, "agent"))
            early_id = early[0]["message_id"]

            async def early_answered() -> bool:
                found = await front.get(f"/v1/messages/{early_id}")
                return bool(found["status"] == "done" and found["reply"])

            await eventually(early_answered, timeout=60, what="the early message answered")
            # Started once the agent is up: alembic (store.open) is not safe to run twice
            # at once in one process (separate processes are fine).
            await stack.enter_async_context(role(home, "scheduler"))

            # Streaming crosses from the agent's hub to the channels role's.
            status, lines = await front.post(
                "/v1/messages", {"session": "cli:s", "text": "stream me", "timeout": 60}
            )
            assert status == 200
            deltas = "".join(line["text"] for line in lines if line["type"] == "delta")
            assert deltas == "echo: stream me" and lines[-1]["text"] == deltas

            # A schedule made through the control API fires in the scheduler role.
            soon = (datetime.now(UTC) + timedelta(seconds=2)).isoformat(timespec="seconds")
            status, made = await front.post(
                "/v1/schedules",
                {"kind": "at", "spec": soon, "prompt": "tick", "session": "cli:sched"},
            )
            assert status == 201, made

            async def fired() -> bool:
                async with front.http.get(BASE + "/v1/sessions/cli:sched") as response:
                    if response.status == 404:  # not fired yet
                        return False
                    detail = await response.json()
                return any(
                    h["role"] == "assistant" and h["content"] == "echo: tick"
                    for h in detail["history"]
                )

            await eventually(fired, timeout=60, what="the schedule fired and was answered")

            report = await front.get("/v1/status")
            # /metrics (served by the channels role) counts the LLM calls of the agent's.
            async with (
                aiohttp.ClientSession() as web_client,
                web_client.get(f"http://{report['http']}/metrics") as scraped,
            ):
                metrics = await scraped.text()
            calls = fake.stats()["requests"]
            assert f"familiar_llm_latency_seconds_count {float(calls)}" in metrics
            assert 'familiar_process_up{name="channels",role="channels"} 1.0' in metrics
            # Each process's own resources, from /proc, labelled by role and name.
            labels = '{name="channels",role="channels"}'
            for metric in (
                "familiar_process_resident_memory_bytes",
                "familiar_process_cpu_seconds",
            ):
                value = metrics.split(f"{metric}{labels} ", 1)[1].split()[0]
                assert float(value) > 0, metric
            assert [p["role"] for p in report["processes"]] == ["channels"]
            assert report["busy_sessions"] == 0
            assert [c["name"] for c in report["channels"]] == ["cli", "ui"]
