"""Lifecycle faults of the multi-process gateway: SIGTERM mid-reply, a poison message, kill -9.

Run: ``PYTHONPATH=. .venv/bin/python -m tests.bench.bench_lifecycle_faults`` (all three
scenarios; ``--only sigterm|poison|kill9`` for one; ``--sessions`` to scale them).
Exits non-zero when a message was lost or answered twice, or a scenario's own rule
broke.

Every scenario spawns the supervisor (``python -m gateway.daemon --home H``, ``multi``,
a fresh SQLite home) against the fake OpenAI-compatible server in its own process (rule
mode: ``!sleep N`` waits, ``!tool exec {...}`` calls the exec tool). Senders talk to the
control socket with `ControlClient` like ``familiar send`` (no streaming, waiting for the
reply). For each scenario it prints:

- ``accepted``: messages the gateway acknowledged (a message id came back);
- ``answered``: accepted messages with exactly one stored reply of the right kind
  (the echo of their text, or for a poison message its own error);
- ``to_sender``: replies the waiting sender got on its own connection;
- ``lost``: accepted messages with no reply once the gateway ran again;
- ``duplicated``: messages with more than one reply row or assistant history row.

Scenarios:

- **sigterm**: N sessions each wait for a ``!sleep 2`` turn (every ``--slow-every``-th
  one ``!sleep 8``, longer than ``agent.shutdown_grace = 5``); once all run, SIGTERM to
  the supervisor. The 2-second turns must reach their senders before the gateway
  exits 0; the slow ones stay queued and are answered after a restart.
- **poison**: one agent worker; N innocent ``!sleep 2`` turns run, then a message
  whose tool call kills its worker (``kill -9 $PPID`` through the exec tool, sandbox
  off). The poison must end with its own "gave up" error (``agent.max_attempts = 3``),
  every innocent message with its echo.
- **kill9**: two agent workers and N sessions of ``!sleep 1`` turns; once agent-1
  holds several, it gets SIGKILL. Its turns are retried alone (suspects); every
  message must be answered once. ``recovery_s`` is from the kill to the last reply.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gateway.control.client import ControlClient, ControlError, DaemonUnavailable
from gateway.control.protocol import Accepted, ReplyLine, TimeoutLine
from tests.daemon_env import daemon_env

ROOT = Path(__file__).resolve().parents[2]
POISON = '!tool exec {"command": "kill -9 $PPID"}'


# -- processes ----------------------------------------------------------------------------


async def _start_fake(latency_ms: int) -> tuple[asyncio.subprocess.Process, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.fakes.fake_openai", "--port", "0",
        "--latency-ms", str(latency_ms),
        cwd=ROOT, env=daemon_env(), stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert proc.stdout is not None
    line = (await asyncio.wait_for(proc.stdout.readline(), 30)).split()
    assert line and line[0] == b"PORT", line
    return proc, f"http://127.0.0.1:{int(line[1])}/v1"


class Gateway:
    """One supervisor on a fresh home, restartable."""

    def __init__(self, home: Path, base_url: str, *, workers: int, extra: str = "") -> None:
        self.home = home
        self.log = home / "daemon.log"
        self.proc: asyncio.subprocess.Process | None = None
        (home / "config.toml").write_text(
            f'[provider]\nkind = "openai"\nbase_url = "{base_url}"\nmodel = "fake-model"\n'
            'api_key = "sk-bench"\n\n[http]\nenabled = false\n\n'
            "[agent]\nshutdown_grace = 5\nmax_attempts = 3\nmax_concurrent_sessions = 64\n\n"
            f'[gateway]\nprocesses = "multi"\nagent_workers = {workers}\n'
            f"restart_backoff_max = 2\n{extra}"
        )

    def logs(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def table(self) -> dict[str, dict[str, Any]]:
        try:
            body = json.loads((self.home / "run" / "processes.json").read_text())
        except (OSError, ValueError):
            return {}
        return {p["name"]: p for p in body["processes"]}

    async def start(self) -> None:
        with self.log.open("ab") as log:
            self.proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "gateway.daemon", "--home", str(self.home),
                cwd=ROOT, env=daemon_env(), stdout=log, stderr=log,
            )  # fmt: skip
        deadline = time.monotonic() + 120
        while True:
            if self.proc.returncode is not None:
                raise RuntimeError(f"gateway exited at start:\n{self.logs()[-3000:]}")
            table = self.table()
            if table and all(p["state"] == "running" for p in table.values()):
                try:
                    async with ControlClient(self.home) as client:
                        await client.status()
                    return
                except DaemonUnavailable:
                    pass
            if time.monotonic() > deadline:
                raise RuntimeError("gateway not ready within 120 s")
            await asyncio.sleep(0.1)

    async def terminate(self) -> tuple[int, float]:
        assert self.proc is not None
        t0 = time.perf_counter()
        self.proc.send_signal(signal.SIGTERM)
        code = await asyncio.wait_for(self.proc.wait(), 120)
        return code, time.perf_counter() - t0

    async def ensure_dead(self) -> None:
        pids = [p["pid"] for p in self.table().values() if p.get("pid")]
        if self.proc is not None and self.proc.returncode is None:
            self.proc.kill()
            await self.proc.wait()
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def _query(home: Path, sql: str, *args: object) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(f"file:{home / 'familiar.db'}?mode=ro", uri=True, timeout=10)
    try:
        return list(conn.execute(sql, args).fetchall())
    finally:
        conn.close()


# -- senders --------------------------------------------------------------------------------


@dataclass
class Sent:
    key: str
    text: str
    message_id: str | None = None
    reply: str | None = None
    ended: str = ""
    """``reply``, ``stopping`` (told it stays queued), ``lost`` (connection cut)."""


async def _send(home: Path, sent: Sent) -> None:
    try:
        async with ControlClient(home) as client:
            async for line in client.send(sent.key, sent.text, stream=False):
                if isinstance(line, Accepted):
                    sent.message_id = line.message_id
                elif isinstance(line, ReplyLine):
                    sent.reply, sent.ended = line.text, "reply"
                elif isinstance(line, TimeoutLine):
                    sent.ended = line.reason
    except (DaemonUnavailable, ControlError):
        sent.ended = "lost" if sent.message_id is not None else "refused"


async def _until(what: str, check: Any, timeout: float = 180.0) -> None:
    deadline = time.monotonic() + timeout
    while not await asyncio.to_thread(check):
        if time.monotonic() > deadline:
            raise RuntimeError(f"not within {timeout:g} s: {what}")
        await asyncio.sleep(0.1)


def _statuses(home: Path, ids: list[str]) -> Counter[str]:
    if not ids:
        return Counter()
    marks = ",".join("?" * len(ids))
    rows = _query(home, f"SELECT status FROM inbound WHERE id IN ({marks})", *ids)
    return Counter(s for (s,) in rows)


@dataclass
class Result:
    scenario: str
    accepted: int = 0
    answered: int = 0
    to_sender: int = 0
    lost: int = 0
    duplicated: int = 0
    extra: dict[str, Any] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    def line(self) -> str:
        extra = " ".join(f"{k}={v}" for k, v in self.extra.items())
        return (
            f"{self.scenario:8} accepted={self.accepted} answered={self.answered} "
            f"to_sender={self.to_sender} lost={self.lost} duplicated={self.duplicated} {extra}"
        )


def _judge(home: Path, result: Result, sent: list[Sent], expect: dict[str, str]) -> None:
    """Count answered / lost / duplicated from the store; ``expect``: id -> reply text
    (or the start of it) each accepted message must have."""
    accepted = [s for s in sent if s.message_id is not None]
    result.accepted = len(accepted)
    result.to_sender = sum(s.ended == "reply" for s in accepted)
    for s in accepted:
        mid = s.message_id or ""
        replies = [json.loads(p)["text"] for (p,) in _query(
            home, "SELECT payload FROM outbound WHERE inbound_id=?", mid
        )]  # fmt: skip
        (answers,) = _query(
            home,
            "SELECT COUNT(*) FROM history WHERE inbound_id=? AND role='assistant'",
            mid,
        )[0]
        if not replies:
            result.lost += 1
        elif len(replies) > 1 or answers > 1:
            result.duplicated += 1
        elif replies[0].startswith(expect[mid]):
            result.answered += 1
        else:
            result.problems.append(f"{mid}: reply {replies[0][:80]!r}, wanted {expect[mid]!r}")
        if s.reply is not None and s.reply != (replies[0] if replies else None):
            result.problems.append(f"{mid}: sender got {s.reply[:80]!r}")


# -- scenarios ------------------------------------------------------------------------------


async def sigterm(work: Path, url: str, sessions: int, slow_every: int) -> Result:
    result = Result("sigterm")
    gw = Gateway(work, url, workers=2)
    try:
        await gw.start()
        sent = []
        for i in range(sessions):
            slow = slow_every > 0 and i % slow_every == slow_every - 1
            sent.append(Sent(f"cli:term-{i}", f"!sleep {8 if slow else 2} term {i}"))
        tasks = [asyncio.create_task(_send(work, s)) for s in sent]
        await _until(
            "every turn running",
            lambda: (
                all(s.message_id for s in sent)
                and _statuses(work, [s.message_id or "" for s in sent])["claimed"] == sessions
            ),
        )
        code, seconds = await gw.terminate()
        await asyncio.gather(*tasks)
        result.extra |= {"exit": code, "stop_s": round(seconds, 2)}
        result.extra["told_queued"] = sum(s.ended == "stopping" for s in sent)
        ids = [s.message_id or "" for s in sent]
        result.extra["released"] = _statuses(work, ids)["pending"]
        await gw.start()  # the rest is answered after the restart
        await _until("all answered", lambda: _statuses(work, ids)["done"] == len(ids))
        await gw.terminate()
        _judge(work, result, sent, {s.message_id or "": f"echo: {s.text}" for s in sent})
        fast = [s for s in sent if "!sleep 2" in s.text]
        if code != 0 or any(s.ended != "reply" for s in fast):
            result.problems.append("a turn that fits in the grace did not reach its sender")
    finally:
        await gw.ensure_dead()
    return result


async def poison(work: Path, url: str, sessions: int) -> Result:
    result = Result("poison")
    gw = Gateway(work, url, workers=1, extra='\n[tools.exec]\nsandbox = "none"\n')
    try:
        await gw.start()
        first_pid = gw.table()["agent-1"]["pid"]
        innocent = [Sent(f"cli:inn-{i}", f"!sleep 2 innocent {i}") for i in range(sessions)]
        tasks = [asyncio.create_task(_send(work, s)) for s in innocent]
        await _until(
            "innocent turns running",
            lambda: (
                all(s.message_id for s in innocent)
                and _statuses(work, [s.message_id or "" for s in innocent])["claimed"] == sessions
            ),
        )
        bad = Sent("cli:poison", POISON)
        t0 = time.perf_counter()
        tasks.append(asyncio.create_task(_send(work, bad)))
        everyone = [*innocent, bad]
        await _until(
            "every message settled",
            lambda: (
                all(s.message_id for s in everyone)
                and sum(_statuses(work, [s.message_id or "" for s in everyone]).values())
                == len(everyone)
                and not {"pending", "claimed"}
                & set(_statuses(work, [s.message_id or "" for s in everyone]))
            ),
            timeout=600,
        )
        settled_s = time.perf_counter() - t0
        await asyncio.gather(*tasks)
        table = gw.table()
        await gw.terminate()
        expect = {s.message_id or "": f"echo: {s.text}" for s in innocent}
        expect[bad.message_id or ""] = "Sorry, I could not finish this message: I gave up after 3"
        _judge(work, result, everyone, expect)
        attempts = dict(_query(work, "SELECT id, attempts FROM inbound"))
        result.extra |= {
            "settled_s": round(settled_s, 1),
            "worker_restarts": table["agent-1"]["restarts"],
            "innocent_attempts": dict(Counter(attempts[s.message_id or ""] for s in innocent)),
            "poison_attempts": attempts[bad.message_id or ""],
        }
        if table["agent-1"]["pid"] == first_pid:
            result.problems.append("the poison message never killed its worker")
    finally:
        await gw.ensure_dead()
    return result


async def kill9(work: Path, url: str, sessions: int) -> Result:
    result = Result("kill9")
    gw = Gateway(work, url, workers=2)
    try:
        await gw.start()
        victim = gw.table()["agent-1"]["pid"]
        owner_part = f"/{victim}/"
        sent = [Sent(f"cli:load-{i}", f"!sleep 1 load {i}") for i in range(sessions)]
        tasks = []
        for s in sent:
            tasks.append(asyncio.create_task(_send(work, s)))
            await asyncio.sleep(0.005)  # a stream of arrivals, not one burst

        def held() -> int:
            rows = _query(
                work, "SELECT lease_owner FROM inbound WHERE status='claimed' AND lease_owner "
                "IS NOT NULL"
            )  # fmt: skip
            return sum(owner_part in o for (o,) in rows)

        await _until("agent-1 holding turns", lambda: held() >= max(2, sessions // 10))
        holding = held()
        os.kill(victim, signal.SIGKILL)
        t0 = time.perf_counter()
        await asyncio.gather(*tasks)
        recovery = time.perf_counter() - t0
        await gw.terminate()
        _judge(work, result, sent, {s.message_id or "": f"echo: {s.text}" for s in sent})
        retried = gw.logs().count("retrying alone after an interrupted attempt")
        result.extra |= {
            "held_by_killed": holding,
            "retried_alone": retried,
            "recovery_s": round(recovery, 1),
        }
    finally:
        await gw.ensure_dead()
    return result


# -- main -------------------------------------------------------------------------------------


def _commit() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        )
        return out.stdout.strip() or "?"
    except OSError:
        return "?"


async def main_async(args: argparse.Namespace) -> int:
    fake, url = await _start_fake(args.latency_ms)
    results: list[Result] = []
    try:
        for name in args.only or ["sigterm", "poison", "kill9"]:
            work = Path(tempfile.mkdtemp(prefix=f"fam-{name}-", dir="/tmp"))
            try:
                if name == "sigterm":
                    results.append(await sigterm(work, url, args.sessions, args.slow_every))
                elif name == "poison":
                    results.append(await poison(work, url, args.innocent))
                else:
                    results.append(await kill9(work, url, args.load))
            finally:
                if args.keep:
                    print(f"kept {work}")
                else:
                    shutil.rmtree(work, ignore_errors=True)
            print(results[-1].line(), flush=True)
    finally:
        fake.terminate()
        await fake.wait()
    cpus = os.cpu_count()
    print(
        f"# {time.strftime('%Y-%m-%d')} commit {_commit()} · {platform.machine()} "
        f"{cpus} CPU · Python {platform.python_version()} · fake LLM {args.latency_ms} ms"
    )
    print(json.dumps([r.__dict__ for r in results], default=str))
    bad = [r for r in results if r.lost or r.duplicated or r.problems]
    for r in bad:
        print(f"FAILED {r.scenario}: {r.problems}", file=sys.stderr)
    return 1 if bad else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", action="append", choices=["sigterm", "poison", "kill9"])
    parser.add_argument("--sessions", type=int, default=20, help="sigterm: sessions in flight")
    parser.add_argument("--slow-every", type=int, default=5, help="sigterm: every Nth outlasts")
    parser.add_argument("--innocent", type=int, default=3, help="poison: innocent messages")
    parser.add_argument("--load", type=int, default=100, help="kill9: sessions")
    parser.add_argument("--latency-ms", type=int, default=200)
    parser.add_argument("--keep", action="store_true", help="keep the homes (logs, store)")
    sys.exit(asyncio.run(main_async(parser.parse_args())))


if __name__ == "__main__":
    main()
