"""The multi-process gateway for real: the supervisor, its role processes, kill -9, SIGTERM.

Every test spawns ``python -m gateway.daemon --home H`` with ``gateway.processes =
"multi"`` (the default) and works through the control socket, the process table the
supervisor writes and the SQLite file (opened read-only), like an operator would.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import socket
import sqlite3
import struct
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, suppress
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from sqlalchemy import text

from core.bus.sql import SqlBus
from core.events import EventLog
from core.messages import Delivery
from core.scheduling import SchedulerConfig, ScheduleService
from core.scheduling.records import ScheduleSpec, ScheduleTarget
from core.store.engine import Store
from tests.daemon_env import daemon_env
from tests.e2e.test_daemon_process import REPO, ControlSocket, fake_openai
from tests.waiting import eventually

pytestmark = pytest.mark.slow

BASE = "http://familiar"
TIMEOUT = 120.0
"""Generous: on a loaded 2-core machine a role process takes seconds to start."""


@pytest.fixture
def home() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="fam-", dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def write_config(
    home: Path, base_url: str, *, workers: int = 2, extra: str = "", processes: str = "multi"
) -> None:
    (home / "config.toml").write_text(
        f'[provider]\nkind = "openai"\nbase_url = "{base_url}"\nmodel = "fake-model"\n'
        'api_key = "sk-test"\n\n[http]\nport = 0\n\n'
        "[agent]\nshutdown_grace = 5\nlease_seconds = 60\n\n"
        f'[gateway]\nprocesses = "{processes}"\nagent_workers = {workers}\n'
        f"restart_backoff_max = 2\n{extra}"
    )


class Gateway(ControlSocket):
    """One spawned supervisor (``python -m gateway.daemon --home HOME``) or role."""

    def __init__(self, home: Path, *args: str, env: dict[str, str] | None = None) -> None:
        self.home = home
        self.args = args
        self.env = {**daemon_env(), **(env or {})}
        self.proc: asyncio.subprocess.Process | None = None
        self.log = home / f"daemon{'-'.join(args)}.log"

    async def start(self) -> None:
        with self.log.open("ab") as log:
            self.proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "gateway.daemon", "--home", str(self.home), *self.args,
                cwd=REPO, env=self.env, stdout=log, stderr=log,
            )  # fmt: skip

    def logs(self) -> str:
        return self.log.read_text(errors="replace")

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.returncode is None

    def table(self) -> dict[str, dict[str, Any]]:
        """The supervisor's process table, by role name (``agent-1``...)."""
        try:
            body = json.loads((self.home / "run" / "processes.json").read_text())
        except (OSError, ValueError):
            return {}
        return {p["name"]: p for p in body["processes"]}

    def all_running(self) -> bool:
        table = self.table()
        return bool(table) and all(p["state"] == "running" for p in table.values())

    async def wait_ready(self) -> None:
        async def ready() -> bool:
            assert self.alive, self.logs()
            return self.all_running() and await self._answers()

        await eventually(ready, timeout=TIMEOUT, interval=0.2, what="every role running")

    async def answering(self) -> bool:
        """Whether the control socket answers ``/v1/status``."""
        return await self._answers()

    async def _answers(self) -> bool:
        try:
            await self.get("/v1/status")
        except (aiohttp.ClientConnectionError, FileNotFoundError, AssertionError):
            return False
        return True

    async def send_streaming(self, session: str, text: str) -> list[dict[str, Any]]:
        """Send and read every NDJSON line of the answer (deltas, then the reply)."""
        body = {"session": session, "text": text, "stream": True, "timeout": TIMEOUT}
        async with self._session() as http, http.post(BASE + "/v1/messages", json=body) as r:
            assert r.status == 200, await r.text()
            return [json.loads(line) async for line in r.content if line.strip()]

    async def wait_restarted(self, name: str, old_pid: int) -> int:
        """Wait until role ``name`` runs again under a new pid; that pid."""

        def restarted() -> bool:
            row = self.table().get(name, {})
            return row.get("state") == "running" and row.get("pid") not in (None, old_pid)

        await eventually(restarted, timeout=TIMEOUT, what=f"{name} restarted")
        return int(self.table()[name]["pid"])

    async def answers(self, key: str, text: str) -> None:
        """Submit ``text`` and wait for the fake's echo to be stored as its reply."""
        message_id = await self.submit(key, text)
        await eventually(lambda: bool(_replies(self.home, message_id)), timeout=TIMEOUT)
        assert _replies(self.home, message_id)[0][0] == f"echo: {text}"

    async def stop(self) -> int:
        assert self.proc is not None
        if self.proc.returncode is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return await asyncio.wait_for(self.proc.wait(), TIMEOUT)
        except TimeoutError:
            self.proc.kill()
            raise AssertionError("did not exit after SIGTERM:\n" + self.logs()) from None

    async def kill(self) -> None:
        if self.alive:
            assert self.proc is not None
            self.proc.kill()
            await self.proc.wait()


@asynccontextmanager
async def running(
    home: Path, *args: str, env: dict[str, str] | None = None
) -> AsyncIterator[Gateway]:
    gateway = Gateway(home, *args, env=env)
    await gateway.start()
    try:
        yield gateway
    finally:
        pids = [p["pid"] for p in gateway.table().values() if p.get("pid")]
        await gateway.kill()
        for pid in pids:  # children stop when the supervisor vanishes; make sure
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (exited, not yet reaped by a dead parent's adopter) counts as gone.
    with suppress(OSError), open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    return False


def _db(home: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{home / 'familiar.db'}?mode=ro", uri=True, timeout=30)


def _query(home: Path, sql: str, *args: object) -> list[tuple[Any, ...]]:
    with _db(home) as db:
        return db.execute(sql, args).fetchall()


def _replies(home: Path, message_id: str) -> list[tuple[str, str]]:
    return [
        (json.loads(p)["text"], s)
        for p, s in _query(
            home, "SELECT payload, status FROM outbound WHERE inbound_id=?", message_id
        )
    ]


async def test_kill_9_of_an_agent_worker_mid_turn_is_answered_exactly_once(home: Path) -> None:
    async with fake_openai() as url:
        write_config(home, url)
        async with running(home) as gw:
            await gw.wait_ready()
            message_id = await gw.submit("cli:victim", "!sleep 4 slow one")

            def holder() -> str | None:
                rows = _query(
                    home,
                    "SELECT lease_owner FROM inbound WHERE id=? AND status='claimed'",
                    message_id,
                )
                return rows[0][0] if rows else None

            await eventually(lambda: holder() is not None, timeout=TIMEOUT, what="claimed")
            owner = holder()
            assert owner is not None
            pid = int(owner.split("/")[1])
            worker = next(n for n, p in gw.table().items() if p["pid"] == pid)
            os.kill(pid, signal.SIGKILL)

            await eventually(
                lambda: [s for _, s in _replies(home, message_id)] == ["delivered"],
                timeout=TIMEOUT,
                what="answered and delivered after the kill",
            )
            assert _replies(home, message_id) == [("echo: !sleep 4 slow one", "delivered")]
            ((attempts, status),) = _query(
                home, "SELECT attempts, status FROM inbound WHERE id=?", message_id
            )
            assert (attempts, status) == (2, "done")  # the killed attempt, then one more
            history = _query(
                home,
                "SELECT role, COUNT(*) FROM history WHERE session_key='cli:victim' GROUP BY role",
            )
            assert dict(history) == {"user": 1, "assistant": 1}
            # The supervisor restarted the killed worker.
            await eventually(
                lambda: (
                    gw.table()[worker]["restarts"] == 1 and gw.table()[worker]["state"] == "running"
                ),
                timeout=TIMEOUT,
                what="worker restarted",
            )
            assert gw.alive
            assert await gw.stop() == 0


async def test_kill_9_of_the_channels_process_loses_nothing_and_send_works_again(
    home: Path,
) -> None:
    async with fake_openai() as url:
        write_config(home, url, workers=1)
        async with running(home) as gw:
            await gw.wait_ready()
            accepted = [await gw.submit(f"cli:s{i}", f"!sleep 2 message {i}") for i in range(4)]
            channels = gw.table()["channels"]["pid"]
            agent = gw.table()["agent-1"]["pid"]
            os.kill(channels, signal.SIGKILL)

            # The agent keeps working with the front down: every accepted message settles.
            def settled() -> bool:
                marks = ",".join("?" * len(accepted))
                rows = _query(home, f"SELECT status FROM inbound WHERE id IN ({marks})", *accepted)
                return len(rows) == len(accepted) and all(s == "done" for (s,) in rows)

            await eventually(settled, timeout=TIMEOUT, what="settled while channels are down")
            assert _alive(agent) and gw.table()["agent-1"]["pid"] == agent

            await eventually(
                lambda: (
                    gw.table()["channels"]["pid"] not in (None, channels)
                    and gw.table()["channels"]["state"] == "running"
                ),
                timeout=TIMEOUT,
                what="channels restarted",
            )
            sent = await asyncio.to_thread(
                subprocess.run,
                [
                    sys.executable,
                    "-m",
                    "gateway.cli",
                    "send",
                    "--home",
                    str(home),
                    "after the kill",
                ],
                capture_output=True,
                text=True,
                env=daemon_env(),
                cwd=REPO,
                timeout=TIMEOUT,
            )
            assert sent.returncode == 0, sent.stderr + gw.logs()
            assert "echo: after the kill" in sent.stdout
            # Replies settled while the front was down are delivered by the new one.
            await eventually(
                lambda: all(_replies(home, m) and _replies(home, m)[0][1] == "delivered"
                            for m in accepted),
                timeout=TIMEOUT,
                what="delivered after the restart",
            )  # fmt: skip
            status = await gw.get("/v1/status")
            roles = {p["name"]: p for p in status["processes"]}
            assert sorted(p["role"] for p in status["processes"]) == [
                "agent",
                "channels",
                "scheduler",
                "supervisor",
            ]
            assert roles["channels"]["restarts"] == 1 and roles["agent-1"]["restarts"] == 0
            assert await gw.stop() == 0


async def test_sigterm_stops_every_child_gracefully_and_exits_0(home: Path) -> None:
    async with fake_openai() as url:
        write_config(home, url)
        async with running(home) as gw:
            await gw.wait_ready()
            message_id = await gw.submit("cli:t", "!sleep 1 finish me")
            await eventually(
                lambda: (
                    _query(home, "SELECT status FROM inbound WHERE id=?", message_id)
                    == [("claimed",)]
                ),
                timeout=TIMEOUT,
            )
            # Streaming crosses processes: the agent's deltas reach the control client.
            lines = await gw.send_streaming("cli:stream", "a streamed answer, please")
            deltas = "".join(line["text"] for line in lines if line["type"] == "delta")
            assert deltas == "echo: a streamed answer, please"
            assert lines[-1]["type"] == "reply" and lines[-1]["text"] == deltas
            pids = [p["pid"] for p in gw.table().values()]
            assert len(pids) == 5 and all(_alive(p) for p in pids)  # the supervisor too
            assert await gw.stop() == 0
            assert not any(_alive(p) for p in pids)
            assert {p["state"] for p in gw.table().values()} == {"stopped"}
            # The turn running at SIGTERM finished within the grace (graceful, not killed).
            assert _query(home, "SELECT status FROM inbound WHERE id=?", message_id) == [("done",)]
            assert "did not stop" not in gw.logs()


async def test_a_crash_looping_child_is_backed_off_and_reported_while_the_supervisor_stays(
    home: Path,
) -> None:
    async with fake_openai() as url:
        write_config(home, url, workers=1, extra="crash_loop_restarts = 2\n")
        (home / "run").mkdir(mode=0o700)
        blocker = home / "run" / "gateway.sock"
        blocker.write_text("not a socket")  # the channels role refuses to start: exit 1
        async with running(home) as gw:
            await eventually(
                lambda: gw.table().get("channels", {}).get("state") == "crash-loop",
                timeout=TIMEOUT,
                what="reported as crash-looping",
            )
            first = gw.table()["channels"]["restarts"]
            assert first >= 1 and "exited with status 1" in gw.table()["channels"]["error"]
            await eventually(
                lambda: gw.table()["channels"]["restarts"] >= first + 2,
                timeout=TIMEOUT,
                what="still retried",
            )
            assert gw.alive
            assert "CRASH LOOP" in gw.logs()
            # `familiar status` says so, though nothing answers the control socket.
            shown = await asyncio.to_thread(
                subprocess.run,
                [sys.executable, "-m", "gateway.cli", "status", "--json", "--home", str(home)],
                capture_output=True,
                text=True,
                env=daemon_env(),
                cwd=REPO,
                timeout=TIMEOUT,
            )
            assert shown.returncode == 1, shown.stderr
            report = json.loads(shown.stdout)
            assert gw.proc is not None
            assert (
                report["serving"] is False and report["pid"] == report["supervisor"] == gw.proc.pid
            )
            states = {p["name"]: p["state"] for p in report["processes"]}
            assert states["channels"] == "crash-loop"
            waits = [float(w) for w in _restart_waits(gw.logs())]
            assert waits[:3] == [0.5, 1.0, 2.0]  # doubling, capped at restart_backoff_max

            blocker.unlink()  # the cause is fixed: the next restart runs, the rest follow
            await gw.wait_ready()
            assert gw.table()["channels"]["state"] == "running"
            assert await gw.stop() == 0


def _restart_waits(logs: str) -> list[str]:
    waits = []
    for line in logs.splitlines():
        if "role=channels" in line and "restart in" in line:
            waits.append(line.split("restart in ", 1)[1].split("s", 1)[0])
    return waits


@pytest.mark.postgres
async def test_two_schedulers_on_postgresql_fire_each_schedule_once_and_take_over(
    pg_url: str,
) -> None:
    homes = [Path(tempfile.mkdtemp(prefix="fam-", dir="/tmp")) for _ in range(2)]
    store = Store(url=pg_url)
    await store.open()  # migrates the database before the schedulers start
    try:
        for h in homes:  # two hosts: two homes on one database
            (h / "config.toml").write_text(
                f'[store]\nurl = "{pg_url}"\n\n[scheduler]\nleader_lease = 3\n'
            )
        async with (
            running(homes[0], "--role", "scheduler") as one,
            running(homes[1], "--role", "scheduler") as two,
        ):
            leader = await _leader(store)
            # Schedules created by another process: the leader re-reads the rows.
            service = ScheduleService(
                config=SchedulerConfig(), store=store, bus=SqlBus(store=store),
                events=EventLog(store=store),
            )  # fmt: skip
            target = ScheduleTarget("cli:sched", Delivery(channel="cli", chat_id="sched"))
            now = datetime.now(UTC)
            ids = []
            for i, delay in enumerate((3, 30)):
                at = now + timedelta(seconds=delay)
                spec = ScheduleSpec(
                    kind="at", spec=at.isoformat(), timezone="UTC", run_at=at, prompt=f"tick {i}"
                )
                ids.append((await service.create(target, spec)).id)
            await eventually(
                lambda: _fired(store, ids[0]), timeout=TIMEOUT, what="first schedule fired"
            )
            pid = int(leader.split("/")[1])
            by_pid = {one.proc.pid: one, two.proc.pid: two}  # type: ignore[union-attr]
            other = two if by_pid[pid] is one else one
            await by_pid[pid].kill()  # the leader dies without releasing its lease

            await eventually(
                lambda: _fired(store, ids[1]), timeout=TIMEOUT, what="second schedule fired"
            )
            new_leader = await _leader(store)
            assert int(new_leader.split("/")[1]) == other.proc.pid  # type: ignore[union-attr]
            assert "scheduler leadership taken" in other.logs()
            # One more, due in a second: the new leader fires it after anything overdue
            # (a double firing of the first two would be due at once).
            at = datetime.now(UTC) + timedelta(seconds=1)
            spec = ScheduleSpec(
                kind="at", spec=at.isoformat(), timezone="UTC", run_at=at, prompt="marker"
            )
            marker = (await service.create(target, spec)).id
            await eventually(lambda: _fired(store, marker), timeout=TIMEOUT, what="marker fired")
            counts = await _firings(store)
            assert counts == {ids[0]: 1, ids[1]: 1, marker: 1}
            assert await other.stop() == 0
    finally:
        await store.close()
        for h in homes:
            await asyncio.to_thread(shutil.rmtree, h, True)


async def _leader(store: Store) -> str:
    async def held() -> bool:
        async with store.read() as conn:
            rows = (await conn.execute(text("SELECT owner FROM leases"))).all()
        return bool(rows)

    await eventually(held, timeout=TIMEOUT, what="a leader")
    async with store.read() as conn:
        return str((await conn.execute(text("SELECT owner FROM leases"))).scalar_one())


async def _firings(store: Store) -> dict[int, int]:
    async with store.read() as conn:
        payloads = (await conn.execute(text("SELECT payload FROM inbound"))).scalars().all()
    counts: dict[int, int] = {}
    for payload in payloads:
        schedule_id = json.loads(payload).get("schedule_id")
        if schedule_id is not None:
            counts[schedule_id] = counts.get(schedule_id, 0) + 1
    return counts


async def _fired(store: Store, schedule_id: int) -> bool:
    return schedule_id in await _firings(store)


class NotifySocket:
    """A stand-in for systemd's notification socket that names each sender's pid."""

    def __init__(self, path: Path) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        self.sock.bind(str(path))
        self.sock.setblocking(False)
        self.received: list[tuple[int, str]] = []
        self._arrived = asyncio.Event()
        asyncio.get_running_loop().add_reader(self.sock.fileno(), self._read)

    def _read(self) -> None:
        creds = struct.Struct("3i")
        while True:
            try:
                data, ancillary, _, _ = self.sock.recvmsg(4096, socket.CMSG_SPACE(creds.size))
            except BlockingIOError:
                return
            pid = next(creds.unpack(d[: creds.size])[0] for _, _, d in ancillary)
            self.received.append((pid, data.decode()))
            self._arrived.set()

    async def until(self, text: str, count: int = 1) -> str:
        """Wait for the ``count``-th message containing ``text``; return it."""
        async with asyncio.timeout(TIMEOUT):
            while True:
                found = [m for _, m in self.received if text in m]
                if len(found) >= count:
                    return found[count - 1]
                self._arrived.clear()
                await self._arrived.wait()

    def close(self) -> None:
        asyncio.get_running_loop().remove_reader(self.sock.fileno())
        self.sock.close()


async def test_only_the_supervisor_talks_to_systemd(home: Path) -> None:
    notify = NotifySocket(home / "notify.sock")
    try:
        async with fake_openai() as url:
            write_config(home, url)
            env = {"NOTIFY_SOCKET": str(home / "notify.sock"), "WATCHDOG_USEC": "2000000"}
            async with running(home, env=env) as gw:
                ready = await notify.until("READY=1")
                # READY=1 once every role runs (the table is written before it is sent).
                assert gw.all_running() and len(gw.table()) == 5  # the supervisor's row too
                assert "STATUS=channels running; scheduler running; agent 2/2 running" in ready
                await notify.until("WATCHDOG=1", 2)  # pinged while every child is healthy
                assert {pid for pid, _ in notify.received} == {gw.proc.pid}  # type: ignore[union-attr]
                assert gw.proc is not None
                gw.proc.send_signal(signal.SIGTERM)
                await notify.until("STOPPING=1")
                assert await gw.stop() == 0
                assert {pid for pid, _ in notify.received} == {gw.proc.pid}
    finally:
        notify.close()


def _parent(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("PPid:")))


def _comm(pid: int) -> str:
    return Path(f"/proc/{pid}/comm").read_text().strip()


def _cmdline(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/cmdline").read_text().split("\0")


async def test_roles_are_forked_by_the_zygote_and_restarted_without_it(home: Path) -> None:
    async with fake_openai() as url:
        write_config(home, url, workers=1)
        async with running(home) as gw:
            await gw.wait_ready()
            assert gw.proc is not None
            supervisor = gw.proc.pid
            roles = {name: p["pid"] for name, p in gw.table().items() if name != "supervisor"}
            for pid in roles.values():
                # Forked (the supervisor's command line, no --role) and adopted by it.
                assert "--role" not in _cmdline(pid) and _parent(pid) == supervisor
            assert _comm(roles["agent-1"]) == "familiar-agent"
            # The store was migrated by a forked process of its own, before the roles.
            assert "store migrated pid=" in gw.logs()
            zygote = int(gw.logs().split("zygote started pid=")[1].split('"')[0])
            assert _parent(zygote) == supervisor

            os.kill(zygote, signal.SIGKILL)
            # Reaped by the supervisor: no zombie is left.
            await eventually(lambda: not Path(f"/proc/{zygote}").exists(), timeout=TIMEOUT)
            os.kill(roles["agent-1"], signal.SIGKILL)
            again = await gw.wait_restarted("agent-1", roles["agent-1"])
            assert _cmdline(again)[-3:-1] == ["--role", "agent"]  # a new interpreter now
            assert _parent(again) == supervisor
            assert "starting roles as new interpreters" in gw.logs()
            await gw.answers("cli:after", "still answered")
            assert await gw.stop() == 0


async def test_a_restarted_role_keeps_the_configuration_the_gateway_started_with(
    home: Path,
) -> None:
    async with fake_openai() as url:
        write_config(home, url, workers=1)
        async with running(home) as gw:
            await gw.wait_ready()
            first = gw.table()["agent-1"]["pid"]
            # An edit takes effect when the gateway restarts, not in one role meanwhile:
            # even a broken file leaves a crashed role starting as before.
            (home / "config.toml").write_text("[agent\nbroken = ")
            os.kill(first, signal.SIGKILL)
            again = await gw.wait_restarted("agent-1", first)
            assert "--role" not in _cmdline(again)  # forked, with the supervisor's config
            await gw.answers("cli:kept", "same config")
            assert await gw.stop() == 0
