"""Stop, restart, readiness and poison messages of the multi-process gateway, for real.

Each test spawns the supervisor (``python -m gateway.daemon --home H``, the default
``multi`` mode) against the fake OpenAI-compatible server in a process of its own, and
talks to it as an operator would: ``familiar send`` as a process, ``/readyz`` over
HTTP, the process table, the SQLite file opened read-only.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import socket
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from channels.webhook import signed_headers
from tests.daemon_env import REPO, daemon_env
from tests.e2e.test_daemon_process import fake_openai
from tests.e2e.test_processes import (
    TIMEOUT,
    Gateway,
    _alive,
    _query,
    _replies,
    running,
    write_config,
)
from tests.waiting import eventually

pytestmark = pytest.mark.slow


@pytest.fixture
def home() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="fam-", dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


async def _familiar_send(home: Path, session: str, text: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "gateway.cli", "send", "--home", str(home), "--json",
        "--session", session, text,
        cwd=REPO, env=daemon_env(), stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip


async def _finished(send: asyncio.subprocess.Process) -> tuple[int, dict[str, Any], str]:
    """The send's exit status, the JSON object it printed, and its stderr."""
    out, err = await asyncio.wait_for(send.communicate(), TIMEOUT)
    assert send.returncode is not None
    try:
        printed = json.loads(out)
    except ValueError:
        raise AssertionError(f"not JSON: {out!r}; stderr: {err!r}") from None
    return send.returncode, printed, err.decode()


async def _exited(gw: Gateway) -> int:
    """The exit status of a gateway sent SIGTERM already (a second one could kill it
    once it removed its handlers, on its way out)."""
    assert gw.proc is not None
    return await asyncio.wait_for(gw.proc.wait(), TIMEOUT)


def _inbound_of(home: Path, session: str) -> tuple[str, str, int] | None:
    """(id, status, attempts) of the session's message, once stored."""
    rows = _query(
        home, "SELECT id, status, attempts FROM inbound WHERE session_key=? ORDER BY seq", session
    )
    return (str(rows[0][0]), str(rows[0][1]), int(rows[0][2])) if rows else None


async def _claimed(home: Path, session: str) -> str:
    def claimed() -> bool:
        found = _inbound_of(home, session)
        return found is not None and found[1] == "claimed"

    await eventually(claimed, timeout=TIMEOUT, what=f"{session} claimed")
    found = _inbound_of(home, session)
    assert found is not None
    return found[0]


async def test_sigterm_in_multi_mode_delivers_the_running_turns_reply_to_the_waiting_send(
    home: Path,
) -> None:
    async with fake_openai() as url:
        write_config(home, url, workers=1)  # agent.shutdown_grace = 5
        async with running(home) as gw:
            await gw.wait_ready()
            send = await _familiar_send(home, "waiting", "!sleep 2 reply me")
            message_id = await _claimed(home, "cli:waiting")
            pids = [p["pid"] for p in gw.table().values()]
            assert gw.proc is not None
            gw.proc.send_signal(signal.SIGTERM)  # mid-turn

            code, printed, err = await _finished(send)
            assert code == 0, (printed, err, gw.logs())
            assert printed["message_id"] == message_id
            assert (printed["status"], printed["reply"]) == ("done", "echo: !sleep 2 reply me")
            assert await _exited(gw) == 0
            assert {p["state"] for p in gw.table().values()} == {"stopped"}
            assert not any(_alive(pid) for pid in pids)
            assert "did not stop" not in gw.logs()
            # The front stopped taking messages in first, and stopped last.
            logs = gw.logs()
            assert logs.index("intake stopping") < logs.index("stopped role=agent")
            assert logs.index("stopped role=agent") < logs.index("stopped role=channels")
        assert _replies(home, message_id) == [("echo: !sleep 2 reply me", "delivered")]

        async with running(home) as again:  # nothing is answered twice after a restart
            await again.wait_ready()
            await again.answers("cli:after", "after the restart")
            assert _query(home, "SELECT status, attempts FROM inbound WHERE id=?", message_id) == [
                ("done", 1)
            ]
            assert len(_replies(home, message_id)) == 1
            history = _query(
                home,
                "SELECT role, COUNT(*) FROM history WHERE session_key='cli:waiting' GROUP BY role",
            )
            assert dict(history) == {"user": 1, "assistant": 1}
            assert await again.stop() == 0
        async with aiohttp.ClientSession() as http, http.get(f"{url[:-3]}/_fake/log") as r:
            calls = [e for e in (await r.json())["log"] if "reply me" in e["user_text"]]
        assert len(calls) == 1


WEBHOOK_SECRET = "lifecycle-secret"


@pytest.mark.parametrize("channel_processes", ["one", "per-channel"])
async def test_sigterm_delivers_the_running_turns_reply_to_a_waiting_webhook_caller(
    home: Path, channel_processes: str
) -> None:
    async with fake_openai() as url:
        extra = (
            f'channel_processes = "{channel_processes}"\n\n'
            "[channels.webhook]\nenabled = true\n\n"
            f'[channels.webhook.hooks.ci]\nsecret = "{WEBHOOK_SECRET}"\n'
        )
        write_config(home, url, workers=1, extra=extra)
        async with running(home) as gw:
            await gw.wait_ready()
            base = f"http://{(await gw.get('/v1/status'))['http']}"
            body = json.dumps({"text": "!sleep 2 hook", "session": "hook", "wait": True})
            headers = {
                "Content-Type": "application/json",
                **signed_headers(WEBHOOK_SECRET, body.encode()),
            }
            async with aiohttp.ClientSession() as http:
                call = asyncio.ensure_future(
                    http.post(base + "/webhook/ci", data=body, headers=headers)
                )
                await _claimed(home, "webhook:ci:hook")
                assert gw.proc is not None
                gw.proc.send_signal(signal.SIGTERM)
                async with await asyncio.wait_for(call, TIMEOUT) as response:
                    answer = await response.json()
            assert (response.status, answer["reply"]) == (200, "echo: !sleep 2 hook"), answer
            assert await _exited(gw) == 0


async def test_send_json_after_sigterm_says_the_message_stays_queued(home: Path) -> None:
    async with fake_openai() as url:
        write_config(home, url, workers=1)
        async with running(home) as gw:
            await gw.wait_ready()
            send = await _familiar_send(home, "long", "!sleep 30 too long for the grace")
            message_id = await _claimed(home, "cli:long")
            assert gw.proc is not None
            gw.proc.send_signal(signal.SIGTERM)
            code, printed, err = await _finished(send)
            assert await _exited(gw) == 0
        assert code == 1
        assert printed == {
            "session": "cli:long",
            "message_id": message_id,
            "status": "queued",
            "reply": None,
            "events": [],
        }
        assert f"message {message_id} stays queued" in err
        # Released at the end of the grace, not charged: answered after a restart.
        assert _query(home, "SELECT status, attempts FROM inbound WHERE id=?", message_id) == [
            ("pending", 0)
        ]


async def test_send_json_after_kill_9_of_the_channels_process(home: Path) -> None:
    async with fake_openai() as url:
        write_config(home, url, workers=1)
        async with running(home) as gw:
            await gw.wait_ready()
            send = await _familiar_send(home, "cut", "!sleep 3 cut off")
            message_id = await _claimed(home, "cli:cut")
            os.kill(gw.table()["channels"]["pid"], signal.SIGKILL)
            code, printed, err = await _finished(send)
            assert code == 1, (printed, err)
            assert (printed["message_id"], printed["status"]) == (message_id, "queued")
            assert printed["reply"] is None
            assert "the connection to the gateway was lost" in err
            # It was accepted: answered all the same, and kept for the session.
            await eventually(
                lambda: [s for _, s in _replies(home, message_id)] == ["delivered"],
                timeout=TIMEOUT,
                what="answered after the front came back",
            )
            assert await gw.stop() == 0


async def test_a_poison_message_ends_alone_and_three_innocent_ones_are_answered(
    home: Path,
) -> None:
    """A tool call that kills its worker process (``kill -9 $PPID``: the exec tool's
    shell is a child of the worker) beside three innocent turns on the one worker."""
    async with fake_openai() as url:
        extra = '\n[tools.exec]\nsandbox = "none"\n'
        write_config(home, url, workers=1, extra=extra)
        config = (home / "config.toml").read_text()
        config = config.replace("lease_seconds = 60\n", "lease_seconds = 60\nmax_attempts = 3\n")
        (home / "config.toml").write_text(config)
        async with running(home) as gw:
            await gw.wait_ready()
            worker = gw.table()["agent-1"]["pid"]
            innocent = [await gw.submit(f"cli:i{i}", f"!sleep 3 innocent {i}") for i in range(3)]
            await eventually(
                lambda: all(_query(home, "SELECT status FROM inbound WHERE id=?", m)
                            == [("claimed",)] for m in innocent),
                timeout=TIMEOUT, what="innocent turns running",
            )  # fmt: skip
            poison = await gw.submit("cli:poison", '!tool exec {"command": "kill -9 $PPID"}')
            await gw.wait_restarted("agent-1", worker)  # it took the innocent turns down

            def settled() -> bool:
                ids = [*innocent, poison]
                rows = _query(
                    home,
                    f"SELECT status FROM inbound WHERE id IN ({','.join('?' * len(ids))})",
                    *ids,
                )
                return len(rows) == 4 and all(s in ("done", "failed") for (s,) in rows)

            await eventually(settled, timeout=TIMEOUT * 2, what="every message settled")
            for i, message_id in enumerate(innocent):
                assert _replies(home, message_id)[0][0] == f"echo: !sleep 3 innocent {i}"
                # Charged once, for the run it shared with the poison; then answered alone.
                assert _query(
                    home, "SELECT status, attempts FROM inbound WHERE id=?", message_id
                ) == [("done", 2)]
            ((text, _),) = _replies(home, poison)
            assert "gave up after 3 interrupted attempts" in text
            assert _query(home, "SELECT status FROM inbound WHERE id=?", poison) == [("failed",)]
            # The worker died three times: once beside the others, twice with the poison alone.
            assert gw.table()["agent-1"]["restarts"] == 3
            assert "gave up" not in "".join(t for m in innocent for t, _ in _replies(home, m))
            assert await gw.stop() == 0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_readyz_is_503_until_every_role_serves(home: Path) -> None:
    port = _free_port()
    async with fake_openai() as url:
        write_config(home, url, workers=2)
        config = (home / "config.toml").read_text().replace("port = 0", f"port = {port}")
        (home / "config.toml").write_text(config)
        seen: list[tuple[int, dict[str, Any]]] = []
        async with running(home) as gw, aiohttp.ClientSession() as http:
            deadline = time.monotonic() + TIMEOUT
            while True:
                assert gw.alive and time.monotonic() < deadline, gw.logs()
                try:
                    async with http.get(f"http://127.0.0.1:{port}/readyz") as r:
                        seen.append((r.status, await r.json()))
                except aiohttp.ClientConnectionError:
                    await asyncio.sleep(0.02)
                    continue
                if r.status == 200:
                    table = gw.table()  # read after the 200: every role said READY=1
                    break
                await asyncio.sleep(0.02)
            assert {p["state"] for p in table.values()} == {"running"}
            assert sorted(table) == ["agent-1", "agent-2", "channels", "scheduler", "supervisor"]
            waiting = [body["reasons"] for status, body in seen if status == 503]
            # The front served /readyz while other roles were still starting, and said so.
            assert any(
                any(r.startswith("role process agent-") for r in reasons) for reasons in waiting
            ), seen
            assert await gw.stop() == 0


async def test_a_provider_without_a_model_exits_78_before_anything_starts(home: Path) -> None:
    port = _free_port()
    (home / "config.toml").write_text(
        '[provider]\nkind = "openai"\nbase_url = "http://127.0.0.1:9/v1"\n\n'
        f"[http]\nport = {port}\n"
    )
    gw = Gateway(home)
    await gw.start()
    assert gw.proc is not None
    answered: list[int] = []
    async with aiohttp.ClientSession() as http:
        deadline = time.monotonic() + TIMEOUT
        while gw.proc.returncode is None and time.monotonic() < deadline:
            try:
                async with http.get(f"http://127.0.0.1:{port}/readyz") as r:
                    answered.append(r.status)
            except aiohttp.ClientConnectionError:
                pass
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(gw.proc.wait(), 0.05)
    await gw.kill()
    assert gw.proc.returncode == 78, gw.logs()
    assert answered == []  # nothing ever listened, let alone said ready
    assert "provider.model is required" in gw.logs()
    assert "started role=" not in gw.logs()
    assert not (home / "run" / "gateway.sock").exists()
