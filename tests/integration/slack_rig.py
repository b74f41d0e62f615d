"""The real gateway with the Slack channel against the fake Slack and a fake LLM."""

from __future__ import annotations

import asyncio
import importlib.metadata
import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from gateway.daemon import serve
from gateway.plugins import CHANNELS_GROUP
from tests.fakes.fake_openai import FakeOpenAI
from tests.fakes.fake_slack import FakeSlack, event_body, sign

SLACK = [
    importlib.metadata.EntryPoint(name="slack", value="channels.slack:plugin", group=CHANNELS_GROUP)
]
SECRET = "signing-secret-0123456789"


def overrides(
    slack: FakeSlack, llm: FakeOpenAI | None, *, mode: str = "http", **table: Any
) -> dict[str, Any]:
    channel = {
        "enabled": True,
        "mode": mode,
        "bot_token": slack.bot_token,
        "app_token": slack.app_token,
        "signing_secret": SECRET,
        "api_url": slack.api_url,
        **table,
    }
    provider: dict[str, Any] = {"kind": "scripted"}
    if llm is not None:
        provider = {
            "kind": "openai",
            "base_url": llm.base_url,
            "model": "fake-model",
            "api_key": "sk-fake",
            "max_retries": 0,
        }
    return {
        "http": {"port": 0},
        "provider": provider,
        "agent": {"shutdown_grace": 1.0},
        "channels": {"slack": channel},
    }


@dataclass
class Gateway:
    """A running gateway: its control socket client and HTTP address."""

    control: aiohttp.ClientSession
    http: aiohttp.ClientSession
    task: asyncio.Task[int]
    address: str = ""

    async def status(self) -> dict[str, Any]:
        async with asyncio.timeout(30):
            while True:
                assert not self.task.done(), f"gateway exited with {self.task.result()}"
                try:
                    async with self.control.get("/v1/status") as response:
                        result: dict[str, Any] = await response.json()
                        if result.get("http"):
                            return result
                except aiohttp.ClientConnectionError:
                    pass
                await asyncio.sleep(0.05)

    def channel(self, report: dict[str, Any], name: str = "slack") -> dict[str, Any]:
        return next(c for c in report["channels"] if c["name"] == name)

    async def running(self) -> None:
        async with asyncio.timeout(30):
            while self.channel(await self.status())["state"] != "running":
                await asyncio.sleep(0.05)

    async def post_event(
        self,
        body: dict[str, Any],
        *,
        secret: str = SECRET,
        headers: dict[str, str] | None = None,
        timestamp: int | None = None,
    ) -> tuple[int, float, str]:
        """POST a signed Events API request; (status, seconds to the answer, body)."""
        raw = json.dumps(body)
        sent = time.monotonic()
        async with self.http.post(
            f"http://{self.address}/slack/events",
            data=raw,
            headers={**sign(secret, raw, timestamp), **(headers or {})},
        ) as response:
            text = await response.text()
            return response.status, time.monotonic() - sent, text

    async def readyz(self) -> tuple[int, dict[str, Any]]:
        async with self.http.get(f"http://{self.address}/readyz") as response:
            return response.status, await response.json()


@asynccontextmanager
async def gateway(home: Path, config: dict[str, Any]) -> AsyncIterator[Gateway]:
    stop = asyncio.Event()
    task = asyncio.create_task(
        serve(home, stop=stop, env={}, config_overrides=config, entry_points=SLACK)
    )
    connector = aiohttp.UnixConnector(path=str(home / "run" / "gateway.sock"))
    try:
        async with (
            aiohttp.ClientSession("http://familiar", connector=connector) as control,
            aiohttp.ClientSession() as http,
        ):
            gw = Gateway(control=control, http=http, task=task)
            gw.address = (await gw.status())["http"]
            yield gw
    finally:
        stop.set()
        code = await asyncio.wait_for(task, 30)
    assert code == 0


def dm(
    text: str, *, ts: str, user: str = "UALICE", channel: str = "DALICE", **extra: Any
) -> dict[str, Any]:
    return {
        "type": "message",
        "channel": channel,
        "channel_type": "im",
        "user": user,
        "text": text,
        "ts": ts,
        **extra,
    }


def mention(
    text: str,
    *,
    ts: str,
    channel: str = "CGENERAL",
    user: str = "UALICE",
    thread_ts: str | None = None,
) -> dict[str, Any]:
    event = {
        "type": "app_mention",
        "channel": channel,
        "user": user,
        "text": f"<@UBOT> {text}",
        "ts": ts,
    }
    if thread_ts:
        event["thread_ts"] = thread_ts
    return event


__all__ = [
    "SECRET",
    "SLACK",
    "Gateway",
    "dm",
    "event_body",
    "gateway",
    "mention",
    "overrides",
]
