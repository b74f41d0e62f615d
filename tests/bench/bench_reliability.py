"""Reliability under faults: ``kill -9`` cycles and SIGTERM under load, checked from the store.

Run: ``PYTHONPATH=. .venv/bin/python -m tests.bench.bench_reliability [--cycles 10]
[--senders 50]``. Exits non-zero if an invariant is violated.

Both phases run a real daemon (``python -m gateway.daemon --home H``, a fresh SQLite
home each) against the fake OpenAI-compatible server (a separate process, 200 ms per
LLM call by default, so turns are in flight when the daemon dies). M senders each own
one ``cli:`` session and send messages one after another through the control socket
with :class:`ControlClient` (``send(..., stream=False)``), like ``familiar send`` would.

- ``accepted`` is the acknowledgement: its message id is recorded. A send that fails
  before ``accepted`` (refused while the daemon is down or restarting, or cut by the
  kill) was *not accepted*; the sender sends it again 0.25 s later with a new ``send``
  call, until the daemon accepts it. Every send of one message carries that message's
  own ``client_id``, so one the daemon stored but died before acknowledging is not
  stored twice (``--new-client-id-per-send`` shows what happens otherwise). A send whose connection
  breaks after ``accepted`` is done for the sender, which goes on with its next
  message (so a session may have several messages queued across a restart).
- **kill -9 phase**: every K seconds (uniformly random in ``--kill-every``) the
  daemon gets SIGKILL and is restarted on the same home, ``--cycles`` times; then the
  senders stop, the daemon drains and is stopped with SIGTERM.
- **SIGTERM phase**: senders run (every ``--slow-every``-th session sends ``!sleep``
  messages that outlast ``agent.shutdown_grace``), the daemon gets SIGTERM; we measure
  the time to exit, the exit status, the turns finished within the grace and those
  released; then the daemon is restarted and we measure how long until every accepted
  message is answered.

Each phase is verified from the store (the SQLite file opened read-only after the
daemon stopped) and through the daemon's control API (``GET /v1/messages/{id}`` for
every accepted id, before it stops): every accepted message exists, has exactly one
reply row (the echo of its own text), delivered, exactly one ``session.idle`` event,
exactly one user and one assistant history row; no text is stored as two messages;
replies of a session were settled in submission order.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import re
import shutil
import signal
import sqlite3
import sys
import tempfile
import time
import uuid
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from gateway.control.client import ControlClient, ControlError, DaemonUnavailable
from gateway.control.protocol import Accepted, ReplyLine, TimeoutLine
from tests.daemon_env import daemon_env

ROOT = Path(__file__).resolve().parents[2]
_RETRY_SECONDS = 0.25
"""How long a sender waits before sending a refused message again."""
_RELEASED = re.compile(r"released unfinished messages count=(\d+)")


# -- processes --------------------------------------------------------------------------


async def _start_fake(latency_ms: int) -> tuple[asyncio.subprocess.Process, str]:
    """The fake OpenAI server in its rule mode (``echo: <text>``, ``!sleep N``)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.fakes.fake_openai", "--port", "0",
        "--latency-ms", str(latency_ms),
        cwd=ROOT, env=daemon_env(single=True), stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert proc.stdout is not None
    line = (await asyncio.wait_for(proc.stdout.readline(), 30)).split()
    assert line and line[0] == b"PORT", line
    return proc, f"http://127.0.0.1:{int(line[1])}"


async def _fake_stats(root: str) -> dict[str, Any]:
    async with aiohttp.ClientSession() as http, http.get(f"{root}/_fake/stats") as r:
        r.raise_for_status()
        body: dict[str, Any] = await r.json()
        return body


class Daemon:
    """``python -m gateway.daemon --home HOME``, restartable, logging to HOME/daemon.log."""

    def __init__(self, home: Path, base_url: str, *, sessions: int, grace: float) -> None:
        self.home = home
        self.log = home / "daemon.log"
        self.proc: asyncio.subprocess.Process | None = None
        self.starts = 0
        self.ready_seconds: list[float] = []
        (home / "config.toml").write_text(
            f'[provider]\nkind = "openai"\nbase_url = "{base_url}/v1"\nmodel = "fake-model"\n'
            f'api_key = "sk-bench"\n\n[http]\nenabled = false\n\n'
            f"[agent]\nmax_concurrent_sessions = {max(sessions, 1)}\n"
            f"shutdown_grace = {grace}\n"
        )

    @property
    def db(self) -> Path:
        return self.home / "familiar.db"

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    async def start(self) -> float:
        """Start and wait until the control socket answers; returns the seconds it took."""
        t0 = time.perf_counter()
        with self.log.open("ab") as log:
            self.proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "gateway.daemon", "--home", str(self.home),
                cwd=ROOT, env=daemon_env(single=True), stdout=log, stderr=log,
            )  # fmt: skip
        self.starts += 1
        async with asyncio.timeout(60), ControlClient(self.home) as client:
            while True:
                if self.proc.returncode is not None:
                    raise RuntimeError(f"daemon exited at start:\n{self.log_text()[-3000:]}")
                try:
                    await client.status()
                    break
                except DaemonUnavailable:
                    await asyncio.sleep(0.05)
        seconds = time.perf_counter() - t0
        self.ready_seconds.append(seconds)
        return seconds

    async def kill9(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        await self.proc.wait()

    async def terminate(self) -> tuple[int, float]:
        """SIGTERM; returns the exit status and the seconds until the process exited."""
        assert self.proc is not None
        t0 = time.perf_counter()
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = await asyncio.wait_for(self.proc.wait(), 120)
        except TimeoutError:
            self.proc.kill()
            await self.proc.wait()
            raise RuntimeError("daemon did not exit within 120 s of SIGTERM") from None
        return code, time.perf_counter() - t0

    async def ensure_dead(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.kill()
            await self.proc.wait()


def _db_query(db: Path, query: str, *params: Any) -> list[tuple[Any, ...]]:
    """A read-only query (WAL: fine while the daemon writes)."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
    try:
        return list(conn.execute(query, params).fetchall())
    finally:
        conn.close()


def _status_counts(db: Path) -> Counter[str]:
    return Counter(dict(_db_query(db, "SELECT status, count(*) FROM inbound GROUP BY status")))


# -- senders ----------------------------------------------------------------------------


@dataclass
class Msg:
    """One message a sender means to deliver, and what happened to its sends."""

    key: str
    index: int
    text: str
    client_id: str | None
    """Sent with every ``send`` of this message (None: a fresh one per ``send``)."""
    message_id: str | None = None
    sends: int = 0
    """``send`` calls made (each with its own client id)."""
    refused: int = 0
    """Sends that failed before ``accepted``."""
    broken_after_accept: bool = False
    send_started: float = 0.0
    """``time.time()`` when the last ``send`` began."""
    timed_out: bool = False
    reply: str | None = None


@dataclass
class Load:
    """M senders against one daemon, each on its own session, until ``stop``."""

    home: Path
    senders: int
    think: float
    slow_every: int = 0
    slow_seconds: float = 0.0
    new_client_id_per_send: bool = False
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    msgs: list[Msg] = field(default_factory=list)
    tasks: list[asyncio.Task[None]] = field(default_factory=list)

    def start(self) -> None:
        self.tasks = [asyncio.create_task(self._sender(i)) for i in range(self.senders)]

    async def finish(self) -> None:
        self.stop.set()
        await asyncio.gather(*self.tasks)

    @property
    def accepted(self) -> list[Msg]:
        return [m for m in self.msgs if m.message_id is not None]

    async def _sender(self, i: int) -> None:
        key = f"cli:rel-{i}"
        slow = self.slow_every > 0 and i % self.slow_every == 0
        rng = random.Random(i)
        await asyncio.sleep(rng.uniform(0, self.think))
        j = 0
        while not self.stop.is_set():
            text = f"reliability s{i} m{j}"
            if slow:
                text += f" !sleep {self.slow_seconds:g}"
            client_id = None if self.new_client_id_per_send else f"rel-{i}-{j}-{uuid.uuid4().hex}"
            msg = Msg(key=key, index=j, text=text, client_id=client_id)
            self.msgs.append(msg)
            await self._deliver(msg)
            j += 1
            await asyncio.sleep(rng.uniform(0, self.think))

    async def _deliver(self, msg: Msg) -> None:
        """Send until the daemon accepts it; wait for the reply unless the link breaks."""
        while True:
            msg.sends += 1
            msg.send_started = time.time()
            try:
                async with ControlClient(self.home) as client:
                    async for line in client.send(
                        msg.key, msg.text, stream=False, client_id=msg.client_id
                    ):
                        if isinstance(line, Accepted):
                            msg.message_id = line.message_id
                        elif isinstance(line, ReplyLine):
                            msg.reply = line.text
                        elif isinstance(line, TimeoutLine):
                            msg.timed_out = True  # the daemon is stopping; the reply is kept
                return
            except (DaemonUnavailable, ControlError):
                if msg.message_id is not None:
                    msg.broken_after_accept = True
                    return
                msg.refused += 1
                await asyncio.sleep(_RETRY_SECONDS)  # like a user trying again


# -- waiting and verifying --------------------------------------------------------------


async def _wait_answered(db: Path, ids: set[str], timeout: float) -> float:
    """Seconds until every id in ``ids`` is done or failed (read from the store)."""
    t0 = time.perf_counter()
    deadline = t0 + timeout
    while True:
        rows = await asyncio.to_thread(
            _db_query, db, "SELECT id FROM inbound WHERE status IN ('done', 'failed')"
        )
        if ids <= {r[0] for r in rows}:
            return time.perf_counter() - t0
        if time.perf_counter() > deadline:
            missing = len(ids - {r[0] for r in rows})
            raise RuntimeError(f"{missing} accepted messages still unanswered after {timeout} s")
        await asyncio.sleep(0.2)


async def _api_check(home: Path, msgs: list[Msg]) -> int:
    """``GET /v1/messages/{id}`` for every accepted message: how many say done + echo."""
    ok = 0
    limit = asyncio.Semaphore(32)

    async def one(client: ControlClient, msg: Msg) -> bool:
        assert msg.message_id is not None
        async with limit:
            got = await client.message(msg.message_id)
        reply = got.get("reply") or {}
        return bool(got.get("status") == "done" and reply.get("text") == f"echo: {msg.text}")

    async with ControlClient(home) as client:
        results = await asyncio.gather(*(one(client, m) for m in msgs))
    ok = sum(results)
    return ok


@dataclass
class Verdict:
    """What the store says about one phase."""

    accepted: int
    answered_once: int
    lost: list[str]
    duplicated: list[str]
    order_violations: list[str]
    wrong_replies: list[str]
    undelivered: list[str]
    redelivered: int
    stored_without_ack: int
    attached_on_resend: int
    """Stored by a send that died before ``accepted``, acknowledged to a later send."""
    problems: list[str]

    @property
    def ok(self) -> bool:
        return not (
            self.lost
            or self.duplicated
            or self.order_violations
            or self.wrong_replies
            or self.undelivered
            or self.problems
        )


@dataclass
class _Snapshot:
    """The rows of the store the checks need (read once, read-only)."""

    inbound: dict[str, tuple[Any, ...]]
    """id -> (id, session_key, status, attempts, payload, created_at)."""
    replies: dict[str, list[tuple[Any, ...]]]
    """inbound id -> [(inbound_id, status, payload, rowid)], in settle order."""
    idle: Counter[str]
    user_events: Counter[str]
    history: Counter[tuple[str, str]]

    @classmethod
    def read(cls, db: Path) -> _Snapshot:
        inbound = {
            row[0]: row
            for row in _db_query(
                db, "SELECT id, session_key, status, attempts, payload, created_at FROM inbound"
            )
        }
        replies: dict[str, list[tuple[Any, ...]]] = defaultdict(list)
        for row in _db_query(
            db, "SELECT inbound_id, status, payload, rowid FROM outbound ORDER BY created_at, rowid"
        ):
            replies[row[0]].append(row)

        def events(kind: str) -> Counter[str]:
            rows = _db_query(db, "SELECT message_id FROM events WHERE type = ?", kind)
            return Counter(r[0] for r in rows)

        history = Counter(
            (r[0], r[1])
            for r in _db_query(
                db, "SELECT inbound_id, role FROM history WHERE role IN ('user', 'assistant')"
            )
        )
        return cls(inbound, replies, events("session.idle"), events("user.message"), history)

    def problems(self, mid: str) -> list[str]:
        """What is wrong with a message that has exactly one reply row."""
        found: list[str] = []
        if self.idle[mid] != 1:
            found.append(f"{mid}: {self.idle[mid]} session.idle events")
        if self.user_events[mid] < 1:
            found.append(f"{mid}: no user.message event")
        for role in ("user", "assistant"):
            if self.history[(mid, role)] != 1:
                found.append(f"{mid}: {self.history[(mid, role)]} {role} history rows")
        return found

    def stored_twice(self) -> list[str]:
        """Texts of our sessions stored as two messages (e.g. a resend after a kill)."""
        ids: dict[tuple[str, str], list[str]] = defaultdict(list)
        for row in self.inbound.values():
            if row[1].startswith("cli:rel-"):
                ids[(row[1], json.loads(row[4]).get("text"))].append(row[0])
        return [
            f"{key} {text!r} stored as {len(found)} messages: {found}"
            for (key, text), found in sorted(ids.items())
            if len(found) > 1
        ]

    def order_violations(self, accepted: list[Msg]) -> list[str]:
        """Sessions whose replies did not settle in submission order."""
        by_key: dict[str, list[Msg]] = defaultdict(list)
        for m in accepted:
            by_key[m.key].append(m)
        bad: list[str] = []
        for key, ms in by_key.items():
            ms.sort(key=lambda m: m.index)
            found = [self.replies.get(m.message_id or "") for m in ms]
            rowids = [rs[0][3] for rs in found if rs]
            if rowids != sorted(rowids):
                bad.append(key)
        return bad


def verify(db: Path, msgs: list[Msg]) -> Verdict:
    """Check every accepted message against the store (opened read-only)."""
    snap = _Snapshot.read(db)
    accepted = [m for m in msgs if m.message_id is not None]
    lost: list[str] = []
    duplicated: list[str] = []
    wrong: list[str] = []
    undelivered: list[str] = []
    problems: list[str] = []
    once = redelivered = 0
    for m in accepted:
        mid = m.message_id or ""
        row, rs = snap.inbound.get(mid), snap.replies.get(mid, [])
        if row is None or not rs:
            lost.append(mid)
            continue
        if len(rs) > 1:
            duplicated.append(mid)
            continue
        once += 1
        redelivered += int(row[3] > 1)
        payload = json.loads(rs[0][2])
        if payload.get("text") != f"echo: {m.text}" or payload.get("kind") != "reply":
            wrong.append(f"{mid}: {payload.get('kind')} {payload.get('text')!r}")
        if rs[0][1] != "delivered":
            undelivered.append(mid)
        problems += snap.problems(mid)
    duplicated += snap.stored_twice()
    acked = {m.message_id for m in accepted}
    ours = [r for r in snap.inbound.values() if r[1].startswith("cli:rel-")]
    return Verdict(
        accepted=len(accepted),
        answered_once=once,
        lost=lost,
        duplicated=duplicated,
        order_violations=snap.order_violations(accepted),
        wrong_replies=wrong,
        undelivered=undelivered,
        redelivered=redelivered,
        stored_without_ack=sum(1 for r in ours if r[0] not in acked),
        attached_on_resend=sum(
            1
            for m in accepted
            if m.sends > 1 and snap.inbound.get(m.message_id or "", (0,) * 6)[5] < m.send_started
        ),
        problems=problems,
    )


def _explain(db: Path, verdict: Verdict) -> list[str]:
    """The event log of each message that broke an invariant, for the report."""
    lines: list[str] = []
    ids = [*verdict.lost, *verdict.duplicated, *verdict.undelivered][:10]
    for item in ids:
        mid = item.split(":")[0].split()[0]
        lines.append(f"  {item}")
        for row in _db_query(
            db,
            "SELECT created_at, type, data FROM events WHERE message_id = ? ORDER BY id",
            mid,
        ):
            lines.append(f"    {row[0]:.3f} {row[1]} {row[2][:160]}")
        for row in _db_query(
            db, "SELECT status, attempts, created_at, finished_at FROM inbound WHERE id = ?", mid
        ):
            lines.append(f"    inbound: {row}")
    return lines


# -- phases -----------------------------------------------------------------------------


@dataclass
class PhaseResult:
    name: str
    verdict: Verdict
    api_ok: int
    wall_s: float
    msgs: list[Msg]
    llm_calls: int
    extra: dict[str, Any]
    explain: list[str]


def _sender_counts(msgs: list[Msg]) -> dict[str, int]:
    return {
        "messages": len(msgs),
        "sends": sum(m.sends for m in msgs),
        "refused_before_accept": sum(m.refused for m in msgs),
        "broken_after_accept": sum(m.broken_after_accept for m in msgs),
        "timeout_lines": sum(m.timed_out for m in msgs),
        "replies_seen_by_senders": sum(m.reply is not None for m in msgs),
    }


async def kill_phase(args: argparse.Namespace, fake_root: str, home: Path) -> PhaseResult:
    rng = random.Random(args.seed)
    daemon = Daemon(home, fake_root, sessions=args.senders, grace=args.grace)
    load = Load(
        home=home,
        senders=args.senders,
        think=args.think_ms / 1000,
        new_client_id_per_send=args.new_client_id_per_send,
    )
    calls0 = (await _fake_stats(fake_root))["requests"]
    t0 = time.perf_counter()
    in_flight: list[int] = []
    try:
        await daemon.start()
        load.start()
        lo, hi = args.kill_every
        for cycle in range(args.cycles):
            await asyncio.sleep(rng.uniform(lo, hi))
            claimed = _status_counts(daemon.db)["claimed"]
            await daemon.kill9()
            in_flight.append(claimed)
            took = await daemon.start()
            print(
                f"  kill -9 #{cycle + 1}: {claimed} turns in flight, "
                f"restarted in {took:.2f} s, {len(load.accepted)} accepted so far",
                flush=True,
            )
        await load.finish()
        ids = {m.message_id for m in load.accepted if m.message_id is not None}
        drain = await _wait_answered(daemon.db, ids, timeout=120)
        api_ok = await _api_check(home, load.accepted)
        code, _ = await daemon.terminate()
        wall = time.perf_counter() - t0
    finally:
        await daemon.ensure_dead()
    calls = (await _fake_stats(fake_root))["requests"] - calls0
    verdict = verify(daemon.db, load.msgs)
    extra = {
        "cycles": args.cycles,
        "in_flight_at_kills": sum(in_flight),
        "restart_s_mean": sum(daemon.ready_seconds[1:]) / max(1, len(daemon.ready_seconds) - 1),
        "drain_s": drain,
        "final_exit_code": code,
        **_sender_counts(load.msgs),
    }
    return PhaseResult(
        "kill -9", verdict, api_ok, wall, load.msgs, calls, extra, _explain(daemon.db, verdict)
    )


async def term_phase(args: argparse.Namespace, fake_root: str, home: Path) -> PhaseResult:
    daemon = Daemon(home, fake_root, sessions=args.senders, grace=args.grace)
    load = Load(
        home=home,
        senders=args.senders,
        think=args.think_ms / 1000,
        slow_every=args.slow_every,
        slow_seconds=args.slow_seconds,
        new_client_id_per_send=args.new_client_id_per_send,
    )
    calls0 = (await _fake_stats(fake_root))["requests"]
    t0 = time.perf_counter()
    try:
        await daemon.start()
        load.start()
        await asyncio.sleep(args.term_after)
        before = _status_counts(daemon.db)
        log_from = len(daemon.log_text())
        sigterm_at = time.time()
        load.stop.set()  # no new messages; refused ones are sent again once it is back
        code, exit_s = await daemon.terminate()
        exited_at = time.time()
        released = sum(int(n) for n in _RELEASED.findall(daemon.log_text()[log_from:]))
        finished_in_grace = _db_query(
            daemon.db,
            "SELECT count(*) FROM inbound WHERE finished_at >= ? AND finished_at <= ?",
            sigterm_at,
            exited_at,
        )[0][0]
        after = _status_counts(daemon.db)
        restart_s = await daemon.start()
        t_back = time.perf_counter()
        await load.finish()
        ids = {m.message_id for m in load.accepted if m.message_id is not None}
        await _wait_answered(daemon.db, ids, timeout=120)
        all_answered_s = time.perf_counter() - t_back
        api_ok = await _api_check(home, load.accepted)
        final_code, _ = await daemon.terminate()
        wall = time.perf_counter() - t0
    finally:
        await daemon.ensure_dead()
    calls = (await _fake_stats(fake_root))["requests"] - calls0
    verdict = verify(daemon.db, load.msgs)
    extra = {
        "claimed_before_sigterm": before["claimed"],
        "queued_before_sigterm": before["pending"],
        "exit_code": code,
        "exit_s": exit_s,
        "finished_in_grace": finished_in_grace,
        "released": released,
        "left_pending": after["pending"],
        "left_claimed": after["claimed"],
        "restart_s": restart_s,
        "all_answered_after_restart_s": all_answered_s,
        "final_exit_code": final_code,
        **_sender_counts(load.msgs),
    }
    return PhaseResult(
        "SIGTERM", verdict, api_ok, wall, load.msgs, calls, extra, _explain(daemon.db, verdict)
    )


# -- report -----------------------------------------------------------------------------


def _kill_table(r: PhaseResult, args: argparse.Namespace) -> str:
    v, x = r.verdict, r.extra
    return "\n".join(
        [
            "| kill -9 cycles | senders | accepted | answered once | lost | duplicated "
            "| order violations | redelivered (attempt > 1) | in flight at kills "
            "| sends refused, resent | restart (mean) | wall time |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
            f"| {x['cycles']} | {args.senders} | {v.accepted} | {v.answered_once} "
            f"| {len(v.lost)} | {len(v.duplicated)} | {len(v.order_violations)} "
            f"| {v.redelivered} | {x['in_flight_at_kills']} | {x['refused_before_accept']} "
            f"| {x['restart_s_mean']:.2f} s | {r.wall_s:.1f} s |",
        ]
    )


def _term_table(r: PhaseResult, args: argparse.Namespace) -> str:
    v, x = r.verdict, r.extra
    return "\n".join(
        [
            "| senders | grace | turns running at SIGTERM | exit | time to exit "
            "| finished within grace | released | accepted | answered once | lost "
            "| duplicated | order violations | all answered after restart |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
            f"| {args.senders} | {args.grace:g} s "
            f"| {x['finished_in_grace'] + x['released']} "
            f"| {x['exit_code']} | {x['exit_s']:.2f} s | {x['finished_in_grace']} "
            f"| {x['released']} | {v.accepted} | {v.answered_once} | {len(v.lost)} "
            f"| {len(v.duplicated)} | {len(v.order_violations)} "
            f"| {x['all_answered_after_restart_s']:.2f} s |",
        ]
    )


def _work_table(results: list[PhaseResult], fake_total: int) -> str:
    rows = [
        "| phase | messages | send calls | refused before accepted | broken after accepted "
        "| replies seen by senders | checked via API | stored, acknowledged on resend "
        "| stored, never acknowledged | LLM calls served |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        x = r.extra
        rows.append(
            f"| {r.name} | {x['messages']} | {x['sends']} | {x['refused_before_accept']} "
            f"| {x['broken_after_accept']} | {x['replies_seen_by_senders']} "
            f"| {r.api_ok}/{r.verdict.accepted} | {r.verdict.attached_on_resend} "
            f"| {r.verdict.stored_without_ack} "
            f"| {r.llm_calls} |"
        )
    rows.append(f"\nLLM calls served by the fake in all: {fake_total}")
    return "\n".join(rows)


def _failures(r: PhaseResult) -> list[str]:
    v = r.verdict
    out: list[str] = []
    for label, items in (
        ("lost", v.lost),
        ("duplicated", v.duplicated),
        ("order violations", v.order_violations),
        ("wrong replies", v.wrong_replies),
        ("undelivered", v.undelivered),
        ("other", v.problems),
    ):
        if items:
            out.append(f"{r.name}: {label} ({len(items)}): {items[:10]}")
    if r.api_ok != v.accepted:
        out.append(f"{r.name}: the control API confirmed {r.api_ok}/{v.accepted}")
    if r.extra.get("final_exit_code") != 0:
        out.append(f"{r.name}: final SIGTERM exit status {r.extra['final_exit_code']}")
    if r.name == "SIGTERM" and r.extra["exit_code"] != 0:
        out.append(f"SIGTERM: exit status {r.extra['exit_code']}")
    if v.accepted == 0:
        out.append(f"{r.name}: nothing was accepted")
    return out


async def main_async(args: argparse.Namespace) -> int:
    fake, fake_root = await _start_fake(args.latency_ms)
    homes: list[Path] = []
    results: list[PhaseResult] = []
    t0 = time.perf_counter()
    try:
        for name, phase in (("kill", kill_phase), ("term", term_phase)):
            if name not in args.phases:
                continue
            home = Path(tempfile.mkdtemp(prefix=f"fam-rel-{name}-", dir="/tmp"))
            homes.append(home)
            print(f"{name} phase on {home}", flush=True)
            results.append(await phase(args, fake_root, home))
        fake_total = (await _fake_stats(fake_root))["requests"]
    finally:
        with contextlib.suppress(ProcessLookupError):
            fake.terminate()
        await fake.wait()
    total = time.perf_counter() - t0
    failures = [f for r in results for f in _failures(r)]
    print()
    for r in results:
        print(f"{r.name}: " + json.dumps({k: _round(v) for k, v in r.extra.items()}))
    print()
    by_name = {r.name: r for r in results}
    if "kill -9" in by_name:
        print(_kill_table(by_name["kill -9"], args))
        print()
    if "SIGTERM" in by_name:
        print(_term_table(by_name["SIGTERM"], args))
        print()
    print(_work_table(results, fake_total))
    print(
        f"\nfake LLM latency {args.latency_ms} ms, think time 0-{args.think_ms} ms, "
        f"kill every {args.kill_every[0]:g}-{args.kill_every[1]:g} s, seed {args.seed}; "
        f"total {total:.1f} s"
    )
    for r in results:
        if r.explain:
            print(f"\n{r.name}: event log of the messages that broke an invariant:")
            print("\n".join(r.explain))
    if failures:
        print("\nINVARIANTS VIOLATED:")
        for f in failures:
            print(f"- {f}")
    else:
        print("\nall invariants held")
    if args.keep or failures:
        print(f"kept {' '.join(map(str, homes))}", file=sys.stderr)
    else:
        for home in homes:
            shutil.rmtree(home, ignore_errors=True)
    return 1 if failures else 0


def _round(value: Any) -> Any:
    return round(value, 2) if isinstance(value, float) else value


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cycles", type=int, default=10, help="kill -9 cycles")
    parser.add_argument("--senders", type=int, default=50, help="concurrent sessions")
    parser.add_argument(
        "--kill-every", type=float, nargs=2, default=[3.0, 6.0], metavar=("MIN", "MAX"),
        help="seconds between kills, uniformly random",
    )  # fmt: skip
    parser.add_argument("--latency-ms", type=int, default=200, help="fake LLM latency")
    parser.add_argument("--think-ms", type=int, default=300, help="max pause between sends")
    parser.add_argument("--grace", type=float, default=3.0, help="agent.shutdown_grace")
    parser.add_argument("--term-after", type=float, default=5.0, help="load before SIGTERM")
    parser.add_argument(
        "--slow-every", type=int, default=5,
        help="every Nth session sends messages slower than the grace (SIGTERM phase)",
    )  # fmt: skip
    parser.add_argument("--slow-seconds", type=float, default=10.0)
    parser.add_argument(
        "--new-client-id-per-send", action="store_true",
        help="resend a refused message with a fresh client id (like running `familiar send` "
        "again) instead of the message's own: a message the daemon stored but could not "
        "acknowledge before it died is then stored twice",
    )  # fmt: skip
    parser.add_argument("--phases", nargs="+", default=["kill", "term"], choices=["kill", "term"])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--keep", action="store_true", help="keep the homes")
    args = parser.parse_args()
    sys.exit(asyncio.run(main_async(args)))


if __name__ == "__main__":
    main()
