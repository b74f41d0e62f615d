"""``gateway.channel_processes = "per-channel"`` for real: the webhook channel in a process
of its own behind the front, kill -9 of that process, its restart.

Spawns the supervisor (``python -m gateway.daemon --home H``) with the webhook channel
enabled, and talks to it like a client would: signed webhook requests to the HTTP port,
``familiar send`` and ``familiar status --json`` through the CLI.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from channels.webhook import signed_headers
from tests.daemon_env import daemon_env
from tests.e2e.test_daemon_process import REPO, fake_openai
from tests.e2e.test_processes import TIMEOUT, Gateway, home, running, write_config
from tests.waiting import eventually

__all__ = ["home"]  # the fixture

pytestmark = pytest.mark.slow

SECRET = "per-channel-secret"
PER_CHANNEL = (
    'channel_processes = "per-channel"\n\n'
    "[channels.webhook]\nenabled = true\n\n"
    f'[channels.webhook.hooks.ci]\nsecret = "{SECRET}"\nrate = 100\n'
)


async def _webhook(base: str, text: str) -> tuple[int, dict[str, Any]]:
    """A signed ``POST /webhook/ci`` that waits for the reply: status and JSON body."""
    body = json.dumps({"text": text, "session": "pc", "wait": True}).encode()
    headers = {"Content-Type": "application/json", **signed_headers(SECRET, body)}
    async with (
        aiohttp.ClientSession() as http,
        http.post(base + "/webhook/ci", data=body, headers=headers) as response,
    ):
        return response.status, await response.json()


async def _cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "gateway.cli", *args, "--home", str(home)],
        capture_output=True,
        text=True,
        env=daemon_env(),
        cwd=REPO,
        timeout=TIMEOUT,
    )


def _webhook_state(gw: Gateway) -> Any:
    async def state() -> dict[str, Any]:
        status = await gw.get("/v1/status")
        return next(c for c in status["channels"] if c["name"] == "webhook")

    return state


async def test_a_killed_channel_process_leaves_the_others_answering_and_comes_back(
    home: Path,
) -> None:
    async with fake_openai() as url:
        write_config(home, url, workers=1, extra=PER_CHANNEL)
        async with running(home) as gw:
            await gw.wait_ready()
            table = gw.table()
            assert table["channel:webhook"]["role"] == "channels"
            private = home / "run" / "channels"
            assert stat.S_IMODE(private.stat().st_mode) == 0o700
            assert stat.S_IMODE((private / "webhook.sock").stat().st_mode) == 0o600
            status = await gw.get("/v1/status")
            base = f"http://{status['http']}"
            await eventually(
                lambda: _is_running(_webhook_state(gw)), timeout=TIMEOUT, what="webhook up"
            )

            code, answer = await _webhook(base, "through the front")
            assert (code, answer["reply"]) == (200, "echo: through the front"), answer
            # The delivery was counted in the webhook's process, served by the front.
            out = 'familiar_messages_out_total{channel="webhook",kind="reply"} 1.0'

            async def counted() -> bool:
                async with aiohttp.ClientSession() as http, http.get(base + "/metrics") as r:
                    return out in await r.text()

            await eventually(counted, timeout=TIMEOUT, interval=0.2, what="messages_out")

            listed = await _cli(home, "status", "--json")
            assert listed.returncode == 0, listed.stderr
            names = {p["name"]: p for p in json.loads(listed.stdout)["processes"]}
            assert {"channels", "channel:webhook", "scheduler", "agent-1"} <= set(names)

            victim = table["channel:webhook"]["pid"]
            os.kill(victim, signal.SIGKILL)
            # Down: the front answers for it at once, and says so.
            code, answer = await _webhook(base, "while it is down")
            assert (code, answer) == (503, {"error": "channel webhook is restarting"})
            # ... and reports it failed (what /readyz, status and doctor show).
            found = await _webhook_state(gw)()
            assert (found["state"], found["process"]) == ("failed", "channel:webhook"), found
            assert found["error"].startswith("process down"), found

            async def why() -> bool:  # once the supervisor's table says why
                error = (await _webhook_state(gw)())["error"]
                return bool(error == "process down (killed by SIGKILL)")

            await eventually(why, timeout=TIMEOUT, interval=0.1, what="the reason")
            # The CLI (in the front) keeps answering meanwhile.
            sent = await _cli(home, "send", "the cli still works")
            assert sent.returncode == 0, sent.stderr + gw.logs()
            assert "echo: the cli still works" in sent.stdout

            await eventually(
                lambda: (
                    gw.table()["channel:webhook"]["pid"] not in (None, victim)
                    and gw.table()["channel:webhook"]["state"] == "running"
                    and gw.table()["channel:webhook"]["restarts"] == 1
                ),
                timeout=TIMEOUT,
                what="the webhook process restarted",
            )
            await eventually(
                lambda: _is_running(_webhook_state(gw)), timeout=TIMEOUT, what="webhook up again"
            )
            code, answer = await _webhook(base, "after the restart")
            assert (code, answer["reply"]) == (200, "echo: after the restart"), answer
            assert gw.table()["channels"]["restarts"] == 0  # the front never went down
            assert await gw.stop() == 0


async def _is_running(state: Any) -> bool:
    return bool((await state())["state"] == "running")
