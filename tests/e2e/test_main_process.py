"""``gateway.processes = "main"`` (the default) for real: the agent in the main process, a
channel in a child process of its own, kill -9 of that child, its restart, and the
graceful stop.

Spawns ``python -m gateway.daemon --home H`` with the webhook channel in its own process
(``channel_processes = "per-channel"``; with the default ``one``, only channels with an
SDK of their own, Slack and Teams, get one), and talks to it like a client would: signed
webhook requests to the HTTP port, ``familiar send`` and ``familiar status --json``.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from gateway.channel_children import HUNG_AFTER
from tests.e2e.test_channel_processes import PER_CHANNEL, _cli, _webhook
from tests.e2e.test_daemon_process import fake_openai
from tests.e2e.test_processes import TIMEOUT, Gateway, home, running, write_config
from tests.fakes.fake_slack import FakeSlack, event_body, sign
from tests.integration.slack_rig import SECRET, mention
from tests.waiting import eventually

__all__ = ["home"]  # the fixture

pytestmark = pytest.mark.slow

WEBHOOK = '\n[channels.webhook]\nenabled = true\n\n[channels.webhook.hooks.ci]\nsecret = "s"\n'


async def _processes(gw: Gateway) -> dict[str, dict[str, Any]]:
    status = await gw.get("/v1/status")
    return {p["name"]: p for p in status["processes"]}


async def _webhook_channel(gw: Gateway) -> dict[str, Any]:
    status = await gw.get("/v1/status")
    return next(c for c in status["channels"] if c["name"] == "webhook")


async def test_a_killed_channel_process_leaves_the_agent_answering_and_comes_back(
    home: Path,
) -> None:
    async with fake_openai() as url:
        write_config(home, url, processes="main", extra=PER_CHANNEL)
        async with running(home) as gw:

            async def up() -> bool:
                assert gw.alive, gw.logs()
                try:
                    found = await _webhook_channel(gw)
                except (OSError, AssertionError):
                    return False
                return bool(found["state"] == "running")

            await eventually(up, timeout=TIMEOUT, interval=0.1, what="webhook up")
            assert not (home / "run" / "processes.json").exists()  # no supervisor
            table = await _processes(gw)
            assert sorted(table) == ["channel:webhook", "main"], table
            assert gw.proc is not None and table["main"]["pid"] == gw.proc.pid
            assert table["channel:webhook"]["state"] == "running"
            base = f"http://{(await gw.get('/v1/status'))['http']}"
            code, answer = await _webhook(base, "through the front")
            assert (code, answer["reply"]) == (200, "echo: through the front"), answer

            victim = table["channel:webhook"]["pid"]
            os.kill(victim, signal.SIGKILL)
            code, answer = await _webhook(base, "while it is down")
            assert (code, answer) == (503, {"error": "channel webhook is restarting"})

            async def why() -> bool:
                error = (await _webhook_channel(gw))["error"] or ""
                return error == "process down (killed by SIGKILL)"

            await eventually(why, timeout=TIMEOUT, interval=0.1, what="the reason")
            # The agent, in the main process, keeps answering meanwhile.
            sent = await _cli(home, "send", "the agent still works")
            assert sent.returncode == 0, sent.stderr + gw.logs()
            assert "echo: the agent still works" in sent.stdout

            async def back() -> bool:
                row = (await _processes(gw))["channel:webhook"]
                return bool(
                    row["pid"] not in (None, victim)
                    and row["state"] == "running"
                    and row["restarts"] == 1
                )

            await eventually(back, timeout=TIMEOUT, interval=0.1, what="the channel restarted")
            await eventually(up, timeout=TIMEOUT, interval=0.1, what="webhook up again")
            code, answer = await _webhook(base, "after the restart")
            assert (code, answer["reply"]) == (200, "echo: after the restart"), answer
            child = (await _processes(gw))["channel:webhook"]["pid"]
            assert await gw.stop() == 0
            # The child was stopped with the gateway, not left behind.
            with pytest.raises(ProcessLookupError):
                os.kill(child, 0)


async def test_by_default_one_process_runs_the_agent_and_the_in_process_channels(
    home: Path,
) -> None:
    async with fake_openai() as url:
        write_config(
            home,
            url,
            processes="main",
            extra=WEBHOOK,
        )
        async with running(home) as gw:
            await eventually(gw.answering, timeout=TIMEOUT, interval=0.1, what="control socket")
            table = await _processes(gw)
            assert list(table) == ["main"], table
            assert table["main"]["role"] == "main"
            sent = await _cli(home, "send", "hello")
            assert sent.returncode == 0, sent.stderr + gw.logs()
            assert "echo: hello" in sent.stdout
            assert await gw.stop() == 0


async def _slack_event(base: str, text: str, ts: str) -> int:
    raw = json.dumps(event_body(mention(text, ts=ts)))
    async with (
        aiohttp.ClientSession() as http,
        http.post(base + "/slack/events", data=raw, headers=sign(SECRET, raw)) as response,
    ):
        return response.status


async def test_slack_runs_in_a_child_by_default_and_a_killed_one_comes_back(home: Path) -> None:
    async with fake_openai() as url, FakeSlack() as slack:
        slack_table = (
            f'\n[channels.slack]\nenabled = true\nmode = "http"\nbot_token = "{slack.bot_token}"\n'
            f'app_token = "{slack.app_token}"\nsigning_secret = "{SECRET}"\n'
            f'api_url = "{slack.api_url}"\n'
        )
        write_config(home, url, processes="main", extra=slack_table)
        async with running(home) as gw:

            async def slack_up() -> bool:
                assert gw.alive, gw.logs()
                try:
                    status = await gw.get("/v1/status")
                except (OSError, AssertionError):
                    return False
                found = next(c for c in status["channels"] if c["name"] == "slack")
                return bool(found["state"] == "running")

            await eventually(slack_up, timeout=TIMEOUT, interval=0.1, what="slack up")
            table = await _processes(gw)
            assert sorted(table) == ["channel:slack", "main"], table
            assert gw.proc is not None and table["main"]["pid"] == gw.proc.pid
            assert table["channel:slack"]["role"] == "channels"
            assert table["channel:slack"]["pid"] != gw.proc.pid
            base = f"http://{(await gw.get('/v1/status'))['http']}"

            first = slack.new_ts()
            assert await _slack_event(base, "before", first) == 200
            await eventually(
                lambda: "echo: before" in " ".join(slack.thread(first)),
                timeout=TIMEOUT,
                what="the reply in Slack",
            )
            victim = table["channel:slack"]["pid"]
            os.kill(victim, signal.SIGKILL)
            # The agent, in the main process, answers meanwhile.
            sent = await _cli(home, "send", "the agent still works")
            assert sent.returncode == 0, sent.stderr + gw.logs()
            assert "echo: the agent still works" in sent.stdout

            async def back() -> bool:
                row = (await _processes(gw))["channel:slack"]
                return bool(row["pid"] not in (None, victim) and row["restarts"] == 1)

            await eventually(back, timeout=TIMEOUT, interval=0.1, what="slack restarted")
            await eventually(slack_up, timeout=TIMEOUT, interval=0.1, what="slack up again")
            second = slack.new_ts()
            assert await _slack_event(base, "after", second) == 200
            await eventually(
                lambda: "echo: after" in " ".join(slack.thread(second)),
                timeout=TIMEOUT,
                what="the reply after the restart",
            )
            assert await gw.stop() == 0


async def test_a_stop_that_signals_every_process_at_once_restarts_no_child(home: Path) -> None:
    """What systemd's default ``KillMode=control-group`` does: SIGTERM to the main
    process and its channel child together. The gateway exits 0; the child is not
    started again while the main process finishes its stop."""
    async with fake_openai() as url:
        write_config(home, url, processes="main", extra=PER_CHANNEL)
        async with running(home) as gw:

            async def up() -> bool:
                assert gw.alive, gw.logs()
                try:
                    return bool((await _webhook_channel(gw))["state"] == "running")
                except (OSError, AssertionError):
                    return False

            await eventually(up, timeout=TIMEOUT, interval=0.1, what="webhook up")
            child = (await _processes(gw))["channel:webhook"]["pid"]
            assert gw.proc is not None
            os.kill(child, signal.SIGTERM)
            os.kill(gw.proc.pid, signal.SIGTERM)
            assert await gw.stop() == 0
            assert gw.logs().count("started channel:webhook pid=") == 1, gw.logs()


async def test_a_hung_channel_process_is_killed_and_started_again(home: Path) -> None:
    """A child whose loop stops (here: SIGSTOP) no longer answers on its socket; after
    `HUNG_AFTER` seconds the main process kills it and starts it again."""
    async with fake_openai() as url:
        write_config(home, url, processes="main", extra=PER_CHANNEL)
        async with running(home) as gw:

            async def up() -> bool:
                assert gw.alive, gw.logs()
                try:
                    return bool((await _webhook_channel(gw))["state"] == "running")
                except (OSError, AssertionError):
                    return False

            await eventually(up, timeout=TIMEOUT, interval=0.1, what="webhook up")
            victim = (await _processes(gw))["channel:webhook"]["pid"]
            os.kill(victim, signal.SIGSTOP)

            async def replaced() -> bool:
                row = (await _processes(gw))["channel:webhook"]
                return bool(row["pid"] not in (None, victim) and row["restarts"] == 1)

            await eventually(
                replaced, timeout=HUNG_AFTER + TIMEOUT, interval=0.5, what="hung child replaced"
            )
            assert f"channel:webhook pid={victim} stopped answering" in gw.logs()
            await eventually(up, timeout=TIMEOUT, interval=0.1, what="webhook up again")
            assert await gw.stop() == 0
