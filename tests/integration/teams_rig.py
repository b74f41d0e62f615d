"""The real gateway with the Teams channel against the fake Teams and a fake LLM."""

from __future__ import annotations

import asyncio
import importlib.metadata
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
from tests.fakes.fake_teams import APP_ID, TENANT, FakeTeams

TEAMS = [
    importlib.metadata.EntryPoint(
        name="teams", value="tests.fakes.fake_teams:plugin", group=CHANNELS_GROUP
    )
]
SECRET = "client-secret-0123456789"


def overrides(teams: FakeTeams, llm: FakeOpenAI | None, **table: Any) -> dict[str, Any]:
    channel = {
        "enabled": True,
        "app_id": APP_ID,
        "app_password": SECRET,
        "tenant_id": TENANT,
        "service_url_allow": ["*"],  # the fake connector is http on loopback
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
        "channels": {"teams": channel},
    }


@dataclass
class Gateway:
    """A running gateway: its control socket client and HTTP address."""

    control: aiohttp.ClientSession
    http: aiohttp.ClientSession
    task: asyncio.Task[int]
    teams: FakeTeams
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

    def channel(self, report: dict[str, Any], name: str = "teams") -> dict[str, Any]:
        return next(c for c in report["channels"] if c["name"] == name)

    async def state(self, wanted: str) -> dict[str, Any]:
        async with asyncio.timeout(30):
            while (channel := self.channel(await self.status()))["state"] != wanted:
                await asyncio.sleep(0.05)
        return channel

    async def running(self) -> None:
        await self.state("running")

    async def post(
        self,
        activity: dict[str, Any],
        *,
        token: str | None = "",
        auth: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, float, str]:
        """POST an activity to ``/api/messages``; (status, seconds to the answer, body).

        ``token=""`` signs a valid Bot Framework token; None sends no Authorization.
        """
        headers = dict(headers or {})
        if auth is not None:
            headers["Authorization"] = auth
        elif token is not None:
            headers["Authorization"] = f"Bearer {token or self.teams.token()}"
        sent = time.monotonic()
        async with self.http.post(
            f"http://{self.address}/api/messages", json=activity, headers=headers
        ) as response:
            text = await response.text()
            return response.status, time.monotonic() - sent, text

    async def readyz(self) -> tuple[int, dict[str, Any]]:
        async with self.http.get(f"http://{self.address}/readyz") as response:
            return response.status, await response.json()


@asynccontextmanager
async def gateway(home: Path, teams: FakeTeams, config: dict[str, Any]) -> AsyncIterator[Gateway]:
    stop = asyncio.Event()
    with teams.sdk_jwks():
        task = asyncio.create_task(
            serve(home, stop=stop, env={}, config_overrides=config, entry_points=TEAMS)
        )
        connector = aiohttp.UnixConnector(path=str(home / "run" / "gateway.sock"))
        try:
            async with (
                aiohttp.ClientSession("http://familiar", connector=connector) as control,
                aiohttp.ClientSession() as http,
            ):
                gw = Gateway(control=control, http=http, task=task, teams=teams)
                gw.address = (await gw.status())["http"]
                yield gw
        finally:
            stop.set()
            code = await asyncio.wait_for(task, 30)
    assert code == 0


__all__ = ["SECRET", "TEAMS", "Gateway", "gateway", "overrides"]
