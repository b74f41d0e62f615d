"""Group mode: a sync spawn on a peer against the same work by a local subagent.

Run: ``PYTHONPATH=. .venv/bin/python -m tests.bench.bench_group [--spawns 20]
[--latency-ms 0] [--joins 3] [--max-load 1.5]``: it first waits (up to 15 minutes)
for the 1-minute load average to drop below ``--max-load``. Two spawned one-process
gateways, ``home`` and ``work`` (``accept_from = ["home"]``), on one fresh PostgreSQL
database (127.0.0.1:5432, the tests' ``fresh_pg_database``), each with its own
``store.schema``, with the default ``heartbeat = 30`` and ``expire_after = 120``. Each
has its own loopback OpenAI fake in this process, so an answer can be told apart by
who produced it.

- **join**: ``work`` is started (``--joins`` times, stopped with SIGTERM in between)
  while ``home`` runs; the time from the process start, and from its ``group.joined``
  entry (the database's clock, the same host), until ``home``'s ``/v1/status`` shows it
  active.
- **peer** / **local**: ``--spawns`` messages each, interleaved, one at a time, each in
  its own session of ``home``: its model calls ``sessions_spawn`` with
  ``peer:work`` / ``general-purpose`` in ``sync`` mode; the child's model answers with
  a marker (``WORK-MODEL`` from ``work``'s fake, ``LOCAL-SUBAGENT`` from ``home``'s),
  and the tool result must carry it. One unmeasured spawn of each kind goes first.

Times are taken at the fakes: the caller's model answering with the tool call, the
child's model asked and answering, the caller's model asked again with the result
(the fake's ``--latency-ms`` pause taken off that arrival). "Out" is tool call → child's
model asked, "back" is child's answer → result at the caller's model. "Message" is
the whole message at the control socket (two caller model calls and the child's).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import signal
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import fresh_pg_database
from tests.e2e.group.rig import GroupDb, member, write_member_config
from tests.e2e.test_daemon_process import BASE, Daemon
from tests.fakes.fake_openai import FakeOpenAI, ScriptItem
from tests.waiting import eventually

KINDS = {"peer": "peer:work", "local": "general-purpose"}
PEER_MARK = "WORK-MODEL"
LOCAL_MARK = "LOCAL-SUBAGENT"
GROUP: dict[str, Any] = {"heartbeat": 30, "expire_after": 120}
_TASK = re.compile(r"\b(peer|local) task (-?\d+)\b")
LOAD_POLL = 15.0
LOAD_PATIENCE = 900.0


@dataclass
class Spawn:
    """One spawn's moments (``time.monotonic()`` in this process) and what came back."""

    call: float = 0.0
    asked: float = 0.0
    answered: float = 0.0
    back: float = 0.0
    result: dict[str, Any] = field(default_factory=dict)
    message_s: float = 0.0
    reply: str = ""


@dataclass
class Moments:
    """What the two fakes saw, by ``(kind, index)``."""

    latency: float
    spawns: dict[tuple[str, int], Spawn] = field(default_factory=dict)
    peer_sessions: set[str] = field(default_factory=set)

    def of(self, text: str) -> tuple[Spawn, str]:
        """The spawn a prompt belongs to, and its task text (``peer task 3``)."""
        found = _TASK.search(text)
        assert found is not None, text
        key = (found.group(1), int(found.group(2)))
        return self.spawns.setdefault(key, Spawn()), found.group(0)

    def home(self, session: str | None, messages: list[dict[str, Any]]) -> ScriptItem:
        """``home``'s model: spawn, answer as the local subagent, or report the result."""
        users = [m for m in messages if m.get("role") == "user"]
        user = str(users[-1].get("content") or "") if users else ""
        spawn, task = self.of(user)
        if session and session.startswith("subagent:"):
            return self._child(spawn, f"{LOCAL_MARK}: {task}")
        last = messages[-1]
        if last.get("role") == "tool":
            spawn.back = time.monotonic() - self.latency
            spawn.result = json.loads(str(last.get("content")))
            return f"the child said: {spawn.result.get('result')}"
        spawn.call = time.monotonic()
        kind = task.split()[0]
        args = {"agent_type": KINDS[kind], "prompt": task, "mode": "sync"}
        return [("sessions_spawn", args)]

    def work(self, session: str | None, messages: list[dict[str, Any]]) -> ScriptItem:
        """``work``'s model: answers every task with its marker."""
        self.peer_sessions.add(str(session))
        spawn, task = self.of(str(messages[-1].get("content") or ""))
        return self._child(spawn, f"{PEER_MARK}: {task}")

    def _child(self, spawn: Spawn, text: str) -> str:
        spawn.answered = time.monotonic()
        spawn.asked = spawn.answered - self.latency
        return text


def _pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


def _stats(values: list[float]) -> str:
    ms = [v * 1000 for v in values]
    return f"{_pct(ms, 50):7.1f} {_pct(ms, 95):7.1f} {max(ms):7.1f}"


async def wait_for_quiet(limit: float) -> None:
    """Wait (up to LOAD_PATIENCE) for the 1-minute load average to drop below ``limit``."""
    start = time.monotonic()
    load = os.getloadavg()[0]
    print(f"load average at start: {load:.2f}")
    while load >= limit and time.monotonic() - start < LOAD_PATIENCE:
        await asyncio.sleep(LOAD_POLL)
        load = os.getloadavg()[0]
    waited = time.monotonic() - start
    verdict = "" if load < limit else f" (still >= {limit:g}: measuring anyway)"
    print(f"load average when measuring: {load:.2f} after {waited:.0f} s of waiting{verdict}")


async def _send(d: Daemon, session: str, text: str) -> tuple[float, str]:
    """Send and wait for the reply, as ``familiar send`` does: seconds, reply text."""
    body = {"session": session, "text": text, "stream": False, "timeout": 120}
    start = time.monotonic()
    async with d._session() as http, http.post(BASE + "/v1/messages", json=body) as response:
        assert response.status == 200, await response.text()
        lines = [json.loads(line) async for line in response.content if line.strip()]
    took = time.monotonic() - start
    assert lines[-1]["type"] == "reply", lines
    return took, str(lines[-1]["text"])


async def _state(home: Daemon, name: str) -> str | None:
    group = (await home.get("/v1/status"))["group"]
    return next((m["state"] for m in group["members"] if m["name"] == name), None)


async def _until_state(home: Daemon, name: str, state: str) -> None:
    async def reached() -> bool:
        return await _state(home, name) == state

    await eventually(reached, timeout=60, interval=0.005, what=f"{name} {state} for home")


async def _joined_at(db: GroupDb, name: str) -> float:
    entries = [e for e in await db.timeline() if e.member == name and e.kind == "group.joined"]
    return max(e.at for e in entries).timestamp()


async def _spawns(home: Daemon, moments: Moments, count: int) -> None:
    """One unmeasured spawn of each kind, then ``count`` of each, interleaved."""
    for index in range(-1, count):
        for kind in KINDS:
            took, reply = await _send(home, f"cli:{kind}-{index + 1}", f"{kind} task {index}")
            spawn = moments.spawns[(kind, index)]
            spawn.message_s, spawn.reply = took, reply


def _checked(moments: Moments, kind: str, count: int) -> list[Spawn]:
    """The measured spawns of ``kind`` whose result, and reply, carry the child's marker."""
    mark = PEER_MARK if kind == "peer" else LOCAL_MARK
    checked = []
    for i in range(count):
        spawn = moments.spawns[(kind, i)]
        answer = f"{mark}: {kind} task {i}"
        result = spawn.result
        completed = result.get("status") == "completed"
        if completed and answer in str(result.get("result")) and answer in spawn.reply:
            checked.append(spawn)
    return checked


async def run(spawns: int, latency_ms: float, joins: int, max_load: float) -> None:
    await wait_for_quiet(max_load)
    latency = latency_ms / 1000
    moments = Moments(latency=latency)
    roots = [Path(tempfile.mkdtemp(prefix="fam-bench-group-", dir="/tmp")) for _ in range(2)]
    try:
        async with (
            fresh_pg_database() as url,
            FakeOpenAI(latency=latency, responder=moments.home, keep_bodies=False) as home_llm,
            FakeOpenAI(latency=latency, responder=moments.work, keep_bodies=False) as work_llm,
        ):
            db = GroupDb(url)
            await db.store.open(migrate=False)
            try:
                write_member_config(roots[0], llm=home_llm.base_url, db=db, name="home", **GROUP)
                write_member_config(
                    roots[1], llm=work_llm.base_url, db=db, name="work", accept_from=["home"],
                    **GROUP,
                )  # fmt: skip
                await _measure(db, roots, moments, spawns, joins)
                tasks = await db.rows(
                    "SELECT status, count(*) FROM familiar_group.group_tasks GROUP BY status"
                )
            finally:
                await db.store.close()
            home_calls, work_calls = len(home_llm.log), len(work_llm.log)
    finally:
        for root in roots:
            shutil.rmtree(root, ignore_errors=True)
    _report(moments, spawns, home_calls, work_calls, dict(tasks))


async def _measure(
    db: GroupDb, roots: list[Path], moments: Moments, spawns: int, joins: int
) -> None:
    async with member(roots[0]) as home:
        await home.wait_ready()
        await _until_state(home, "home", "active")
        from_start: list[float] = []
        from_join: list[float] = []
        for j in range(joins):
            started = time.time()
            async with member(roots[1]) as work:
                await _until_state(home, "work", "active")
                seen = time.time()
                from_start.append(seen - started)
                from_join.append(seen - await _joined_at(db, "work"))
                await work.wait_ready()
                if j == joins - 1:
                    await _spawns(home, moments, spawns)
                work.signal(signal.SIGTERM)
                assert await work.wait() == 0, work.logs()
                await _until_state(home, "work", "left")
    print(f"join visibility ({joins} starts of work, heartbeat {GROUP['heartbeat']} s):")
    print(f"  process start -> active in home's roster  p50/p95/max ms {_stats(from_start)}")
    print(f"  group.joined  -> active in home's roster  p50/p95/max ms {_stats(from_join)}")


def _report(
    moments: Moments, spawns: int, home_calls: int, work_calls: int, tasks: dict[str, int]
) -> None:
    print(f"sync spawns, model latency {moments.latency * 1000:g} ms per call (ms):")
    print(
        f"{'kind':<6} {'spawns':>6} {'checked':>7} | {'round trip p50/p95/max':>23} | "
        f"{'out p50/p95/max':>23} | {'back p50/p95/max':>23} | {'message p50/p95/max':>23}"
    )
    for kind in KINDS:
        done = [moments.spawns[(kind, i)] for i in range(spawns)]
        ok = _checked(moments, kind, spawns)
        trip = _stats([s.back - s.call for s in done])
        out = _stats([s.asked - s.call for s in done])
        back = _stats([s.back - s.answered for s in done])
        msg = _stats([s.message_s for s in done])
        print(f"{kind:<6} {len(done):>6} {len(ok):>7} | {trip} | {out} | {back} | {msg}")
    print(
        f"work done: home's model {home_calls} calls, work's model {work_calls} calls "
        f"in {len(moments.peer_sessions)} sessions, group_tasks {tasks}"
    )
    # One warm-up and ``spawns`` measured of each kind; home's model is asked twice per
    # spawn, and once more as the local subagent.
    expected = {"home": 5 * (spawns + 1), "work": spawns + 1}
    checked = sum(len(_checked(moments, kind, spawns)) for kind in KINDS)
    if (home_calls, work_calls) != (expected["home"], expected["work"]) or checked != 2 * spawns:
        raise SystemExit(f"not the work asked for: expected {expected}, {2 * spawns} checked")
    peer_sessions = [s for s in moments.peer_sessions if s.startswith("group:home:")]
    if tasks != {"done": spawns + 1} or len(peer_sessions) != spawns + 1:
        raise SystemExit(f"group tasks {tasks}, peer sessions {len(moments.peer_sessions)}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spawns", type=int, default=20)
    parser.add_argument("--latency-ms", type=float, default=0.0)
    parser.add_argument("--joins", type=int, default=3)
    parser.add_argument("--max-load", type=float, default=1.5, help="wait for a lower load")
    args = parser.parse_args()
    print(f"group mode: home and work on PostgreSQL, {args.spawns} sync spawns of each kind")
    try:
        asyncio.run(run(args.spawns, args.latency_ms, args.joins, args.max_load))
    except pytest.skip.Exception as skipped:  # no PostgreSQL here: nothing to measure
        print(f"skipped: {skipped.msg}")
