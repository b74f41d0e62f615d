"""An in-process gateway with the webhook channel, and a client that signs like a caller."""

from __future__ import annotations

import asyncio
import importlib.metadata
import json
import socket
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from channels.webhook import signed_headers
from gateway.daemon import serve

__all__ = ["WEBHOOK_EP", "Answer", "WebhookGateway", "running_webhook", "write_webhook_config"]

WEBHOOK_EP = importlib.metadata.EntryPoint(
    name="webhook", value="channels.webhook:plugin", group="familiar.channels"
)
"""Until the package is reinstalled with its new entry point."""


def _closed_port_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def write_webhook_config(home: Path, *, provider: str, hooks: str, channel: str = "") -> None:
    """config.toml: the provider table, HTTP on a free port, the webhook channel and hooks."""
    text = (
        f"{provider}\n[http]\nport = 0\n\n[agent]\nshutdown_grace = 2.0\n\n"
        f"[channels.webhook]\nenabled = true\n{channel}\n{hooks}"
    )
    (home / "config.toml").write_text(text)


@dataclass(frozen=True)
class Answer:
    status: int
    body: dict[str, Any]
    headers: Mapping[str, str]


@dataclass
class WebhookGateway:
    """The running gateway: its HTTP base URL and the control socket."""

    base: str
    http: aiohttp.ClientSession
    control: aiohttp.ClientSession
    task: asyncio.Task[int]

    async def status(self) -> dict[str, Any]:
        async with self.control.get("http://familiar/v1/status") as response:
            result: dict[str, Any] = await response.json()
            return result

    async def session(self, key: str) -> dict[str, Any] | None:
        async with self.control.get(f"http://familiar/v1/sessions/{key}?events=1") as response:
            if response.status == 404:
                return None
            result: dict[str, Any] = await response.json()
            return result

    async def request(
        self,
        method: str,
        path: str,
        body: bytes | dict[str, Any] | None = None,
        *,
        secret: str | None = None,
        token: str | None = None,
        timestamp: float | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Answer:
        """Send ``body`` (a dict is JSON-encoded), signed with ``secret`` and/or ``token``."""
        if isinstance(body, bytes):
            data = body
        else:
            data = b"" if body is None else json.dumps(body).encode()
        sent: dict[str, str] = {"Content-Type": "application/json"}
        if secret is not None:
            sent.update(signed_headers(secret, data, now=timestamp or time.time()))
        if token is not None:
            sent["Authorization"] = f"Bearer {token}"
        sent.update(headers or {})
        async with self.http.request(method, self.base + path, data=data, headers=sent) as r:
            assert r.content_type == "application/json", (r.status, await r.text())
            return Answer(r.status, await r.json(), dict(r.headers))

    async def post(self, hook: str, body: bytes | dict[str, Any], **auth: Any) -> Answer:
        return await self.request("POST", f"/webhook/{hook}", body, **auth)

    async def poll(self, hook: str, message_id: str, **auth: Any) -> Answer:
        return await self.request("GET", f"/webhook/{hook}/messages/{message_id}", **auth)

    async def until_done(self, hook: str, message_id: str, **auth: Any) -> dict[str, Any]:
        async with asyncio.timeout(20):
            while True:
                got = await self.poll(hook, message_id, **auth)
                assert got.status == 200, got
                if got.body["status"] in ("done", "failed"):
                    return got.body
                await asyncio.sleep(0.05)


@asynccontextmanager
async def running_webhook(home: Path) -> AsyncIterator[WebhookGateway]:
    """Serve ``home`` (config written beforehand) with the webhook plugin loaded."""
    stop = asyncio.Event()
    task = asyncio.create_task(
        serve(home, stop=stop, env={}, ollama_url=_closed_port_url(), entry_points=[WEBHOOK_EP])
    )
    connector = aiohttp.UnixConnector(path=str(home / "run" / "gateway.sock"))
    async with aiohttp.ClientSession(connector=connector) as control:
        status: dict[str, Any] = {}
        async with asyncio.timeout(30):
            while not status.get("http"):
                assert not task.done(), f"gateway exited early with {task.result()}"
                try:
                    async with control.get("http://familiar/v1/status") as response:
                        status = await response.json()
                except aiohttp.ClientConnectionError:
                    await asyncio.sleep(0.05)
        async with aiohttp.ClientSession() as http:
            try:
                yield WebhookGateway(f"http://{status['http']}", http, control, task)
            finally:
                stop.set()
                assert await asyncio.wait_for(task, 30) == 0
