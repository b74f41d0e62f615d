"""The web panel as a user feels it: page latency on a gateway with realistic state, and
what an open panel's live streams cost the gateway's CPU.

Run: ``PYTHONPATH=. .venv/bin/python -m tests.bench.bench_ui [--requests 50] [--seconds 60]``.

One ``familiar gateway`` (the default ``main`` process mode) with the loopback fake
OpenAI model, spawned and logged into by the e2e panel rig (`spawn_gateway`,
`login_url`: ``familiar ui``'s one-time URL, whose cookie the bench then sends). State
is made through the real paths first: 200 ``cli:`` sessions with 1-5 turns each (every
fourth with a ``list_dir`` tool step) over the control API, a few ``familiar send``
sessions, a ``ui:`` chat posted through ``/ui/chat/send`` with the page's CSRF token,
memory entries (the ``remember`` tool), finished subagent tasks (``sessions_spawn``),
pending ``exec`` approvals and schedules (the control API).

- **pages**: each page fetched ``--requests`` times (interleaved, one keep-alive
  connection, plain aiohttp, after one warm-up fetch each); first byte is the response
  headers arriving (the panel renders a page whole before it sends it), full is the
  body read.
- **live streams**: the gateway's CPU (``/proc/<pid>/stat`` utime + stime over its
  process tree) for ``--seconds`` with no browser, then with 1 and 5 tabs' worth of
  streams open. A "tab" here is one reader on each of the four polling streams
  (approvals, schedules, system, tasks): as if a tab sat on each live page, so it
  bounds one real tab from above. The window starts once every stream has sent its
  first fragment.

Each measured phase waits first (up to 15 min) for the 1-minute load average to drop
below 1.5 (``--max-load``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import aiohttp
import pytest

from gateway.control.client import ControlClient
from gateway.control.protocol import ReplyLine
from tests.bench.bench_processes import _cpu_s, _tree
from tests.e2e.ui.conftest import UiGateway, login_url, spawn_gateway
from tests.fakes.fake_openai import prose

PAGES = ("chat", "sessions", "approvals", "schedules", "tasks", "memory", "system")
STREAMS = ("/ui/approvals/live", "/ui/schedules/live", "/ui/system/live", "/ui/tasks/events")
TABS = (1, 5)
SESSIONS = 200
MEMORIES = 40
TASKS = 12
APPROVALS = 3
SCHEDULES = 5
UI_TURNS = 4
FAMILIAR_SENDS = 3
RM = 'rm -rf "/" --help'
"""Needs approval (it deletes /): stays pending."""
_LOAD_WAIT = 900.0
_CSRF = re.compile(r'<meta name="csrf-token" content="([^"]+)">')
_STREAM_TIMEOUT = aiohttp.ClientTimeout(total=None, sock_read=None)


class _TempDirs:
    """What `spawn_gateway` uses of pytest's ``tmp_path_factory``: fresh directories."""

    def mktemp(self, basename: str) -> Path:
        return Path(tempfile.mkdtemp(prefix=f"fam-{basename}-", dir="/tmp"))


def _tool(name: str, **args: Any) -> str:
    """A message the fake model answers with that tool call."""
    return f"!tool {name} {json.dumps(args)}"


async def _say(client: ControlClient, session: str, text: str) -> str:
    reply = ""
    async for line in client.send(session, text, stream=False, timeout=300):
        if isinstance(line, ReplyLine):
            reply = line.text
    return reply


async def _converse(client: ControlClient, gate: asyncio.Semaphore, i: int) -> None:
    async with gate:
        for turn in range(1 + i % 5):
            text = f"note {i}.{turn}: {prose(40 + 37 * ((i + turn) % 9))}"
            if turn == 1 and i % 4 == 0:
                text = _tool("list_dir", path=".")
            await _say(client, f"cli:bench-{i:03d}", text)


async def _populate(gateway: UiGateway) -> None:
    async with ControlClient(gateway.home, connect_timeout=60) as client:
        gate = asyncio.Semaphore(16)
        await asyncio.gather(*(_converse(client, gate, i) for i in range(SESSIONS)))
        for n in range(MEMORIES):
            fact = f"fact {n}: {prose(60 + 11 * (n % 7))}"
            await _say(client, f"cli:mem-{n % 4}", _tool("remember", text=fact))
        for n in range(TASKS):
            spawn = _tool(
                "sessions_spawn",
                agent_type="general-purpose",
                prompt=f"summarise note {n}",
                description=f"summarise note {n}",
            )
            await _say(client, f"cli:work-{n % 3}", spawn)
        for n in range(APPROVALS):
            reply = await _say(client, f"cli:ops-{n}", _tool("exec", command=RM))
            if "/approve" not in reply:
                raise RuntimeError(f"exec did not ask for approval: {reply[:200]}")
        for n in range(SCHEDULES):
            cron = n % 2 == 1
            await client.add_schedule(
                kind="cron" if cron else "every",
                spec=f"0 {8 + n} * * 1-5" if cron else ("6h", "12h", "1d")[n // 2],
                prompt=f"check the backups ({n})",
                session=f"cli:bench-{n:03d}",
                timezone="Europe/Berlin" if cron else None,
            )


async def _login(http: aiohttp.ClientSession, url: str) -> str:
    async with http.get(url, allow_redirects=False) as resp:
        if resp.status != 303 or "familiar_ui" not in resp.cookies:
            raise RuntimeError(f"login failed: {resp.status} {await resp.text()}")
        return resp.cookies["familiar_ui"].value


async def _wait_replies(client: ControlClient, key: str, count: int) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        history = (await client.session(key))["history"]
        final = [
            m
            for m in history
            if m.get("role") == "assistant"
            and str(m.get("content") or "").startswith(("echo:", "tool said:"))
        ]
        if len(final) >= count:
            return
        await asyncio.sleep(0.2)
    raise RuntimeError(f"{key}: fewer than {count} replies after 120 s")


async def _ui_chat(gateway: UiGateway, http: aiohttp.ClientSession) -> None:
    """Talk in ``ui:bench`` as the panel's form does (the operator's own path)."""
    async with http.get(gateway.url("/ui/chat?s=bench")) as resp:
        found = _CSRF.search(await resp.text())
    if found is None:
        raise RuntimeError("no CSRF token on /ui/chat")
    async with ControlClient(gateway.home) as client:
        for n in range(UI_TURNS):
            text = _tool("list_dir", path=".") if n == 1 else f"question {n}: {prose(120)}"
            form = {"session": "bench", "text": text, "csrf": found.group(1)}
            headers = {"Origin": gateway.base_url}
            url = gateway.url("/ui/chat/send")
            async with http.post(url, data=form, headers=headers, allow_redirects=False) as resp:
                if resp.status != 303:
                    raise RuntimeError(f"chat send: {resp.status} {await resp.text()}")
            await _wait_replies(client, "ui:bench", n + 1)


async def _state(gateway: UiGateway) -> dict[str, Any]:
    async with ControlClient(gateway.home) as client:
        sessions = (await client.find_sessions(limit=1000))["sessions"]
        tasks = await client.tasks()
        return {
            "sessions": Counter(str(s["key"]).split(":", 1)[0] for s in sessions),
            "messages": sum(int(s.get("messages") or 0) for s in sessions),
            "schedules": len(await client.schedules()),
            "memory entries": len(await client.memory(limit=1000)),
            "subagent tasks": Counter(str(t.get("status")) for t in tasks),
            "pending approvals": len((await client.approvals())["pending"]),
        }


def _check(state: dict[str, Any]) -> None:
    """Fail unless the gateway holds what `_populate` and `_bench` made."""
    want = {"schedules": SCHEDULES, "memory entries": MEMORIES, "pending approvals": APPROVALS}
    if (
        any(state[k] != v for k, v in want.items())
        or state["subagent tasks"].get("completed") != TASKS
        or state["sessions"].get("cli", 0) < SESSIONS + FAMILIAR_SENDS
        or state["sessions"].get("ui") != 1
    ):
        raise RuntimeError(f"the gateway does not hold what was made: {state}")


_max_load = 1.5


async def _quiet(what: str) -> float:
    """Wait (up to 15 min) for the 1-minute load average to drop below `_max_load`."""
    deadline = time.monotonic() + _LOAD_WAIT
    while True:
        load = os.getloadavg()[0]
        if load < _max_load:
            print(f"load {load:.2f} before {what}", flush=True)
            return load
        if time.monotonic() >= deadline:
            print(f"load {load:.2f} before {what} (still high after 15 min)", flush=True)
            return load
        print(f"load {load:.2f}: waiting before {what}", flush=True)
        await asyncio.sleep(15)


def _pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


@dataclass
class _Page:
    name: str
    ttfb: list[float] = field(default_factory=list)
    full: list[float] = field(default_factory=list)
    sizes: set[int] = field(default_factory=set)


async def _fetch(http: aiohttp.ClientSession, url: str, page: _Page | None) -> bytes:
    start = time.perf_counter()
    async with http.get(url, allow_redirects=False) as resp:
        first = time.perf_counter() - start
        body = await resp.read()
        full = time.perf_counter() - start
        if resp.status != 200:
            raise RuntimeError(f"{url}: {resp.status} {body[:200]!r}")
    if page is not None:
        page.ttfb.append(first)
        page.full.append(full)
        page.sizes.add(len(body))
    return body


async def _pages(gateway: UiGateway, http: aiohttp.ClientSession, n: int) -> list[_Page]:
    pages = [_Page(name) for name in PAGES]
    for page in pages:  # warm-up: first templates, first statements
        body = await _fetch(http, gateway.url(f"/ui/{page.name}"), None)
        if page.name == "sessions":
            listed = len(set(re.findall(rb"cli:bench-\d{3}", body)))
            print(f"/ui/sessions lists {listed} of the {SESSIONS} cli:bench-* sessions")
            if listed != SESSIONS:
                raise RuntimeError("/ui/sessions does not list every session made")
    await _quiet("the page requests")
    for _ in range(n):
        for page in pages:
            await _fetch(http, gateway.url(f"/ui/{page.name}"), page)
    return pages


@dataclass
class _Reader:
    path: str
    events: Counter[str] = field(default_factory=Counter)
    bytes: int = 0
    first: asyncio.Event = field(default_factory=asyncio.Event)


async def _read(http: aiohttp.ClientSession, url: str, reader: _Reader) -> None:
    async with http.get(url, timeout=_STREAM_TIMEOUT) as resp:
        if resp.status != 200:
            raise RuntimeError(f"{url}: {resp.status}")
        async for line in resp.content:
            reader.bytes += len(line)
            if line.startswith(b"event:"):
                reader.events[line[6:].strip().decode()] += 1
                reader.first.set()
            elif line.startswith(b":"):
                reader.events["keepalive"] += 1


def _gateway_cpu(gateway: UiGateway) -> float:
    return sum(_cpu_s(pid) for pid in _tree(gateway.proc.pid))


@dataclass(frozen=True)
class _Phase:
    tabs: int
    streams: int
    seconds: float
    cpu_s: float
    events: int
    keepalives: int
    bytes: int

    @property
    def cpu_pct(self) -> float:
        return 100 * self.cpu_s / self.seconds


async def _phase(
    gateway: UiGateway, http: aiohttp.ClientSession, tabs: int, seconds: float
) -> _Phase:
    readers = [_Reader(path) for _ in range(tabs) for path in STREAMS]
    tasks = [asyncio.create_task(_read(http, gateway.url(r.path), r)) for r in readers]
    try:
        await asyncio.wait_for(asyncio.gather(*(r.first.wait() for r in readers)), 60)
        await _quiet(f"{tabs} tab(s), {len(readers)} streams" if tabs else "idle, no streams")
        before = [(sum(r.events.values()), r.events["keepalive"], r.bytes) for r in readers]
        cpu0, t0 = _gateway_cpu(gateway), time.perf_counter()
        await asyncio.sleep(seconds)
        cpu, elapsed = _gateway_cpu(gateway) - cpu0, time.perf_counter() - t0
        for task in tasks:
            if task.done():
                task.result()  # a stream that ended: raise its error
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    events = sum(sum(r.events.values()) - b[0] for r, b in zip(readers, before, strict=True))
    keepalives = sum(r.events["keepalive"] - b[1] for r, b in zip(readers, before, strict=True))
    sent = sum(r.bytes - b[2] for r, b in zip(readers, before, strict=True))
    for path in STREAMS if tabs else ():
        mine = [r for r in readers if r.path == path]
        seen = sum((r.events for r in mine), Counter[str]())
        print(f"  {path}: {dict(seen)} over {len(mine)} reader(s), {sum(r.bytes for r in mine)} B")
    return _Phase(tabs, len(readers), elapsed, cpu, events - keepalives, keepalives, sent)


def _page_table(pages: list[_Page]) -> str:
    rows = [
        "| page | bytes | requests | first byte p50 / p95 ms | full p50 / p95 ms |",
        "|---|---:|---:|---:|---:|",
    ]
    for p in pages:
        size = "-".join(str(s) for s in sorted({min(p.sizes), max(p.sizes)}))
        ttfb = f"{_pct(p.ttfb, 50) * 1000:.1f} / {_pct(p.ttfb, 95) * 1000:.1f}"
        full = f"{_pct(p.full, 50) * 1000:.1f} / {_pct(p.full, 95) * 1000:.1f}"
        rows.append(f"| /ui/{p.name} | {size} | {len(p.full)} | {ttfb} | {full} |")
    return "\n".join(rows)


def _cpu_table(phases: list[_Phase]) -> str:
    rows = [
        "| open | streams | s | events (keepalives) | bytes | gateway CPU % of a core "
        "| CPU ms/s | over idle ms/s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    idle = phases[0].cpu_s / phases[0].seconds * 1000
    for ph in phases:
        per_s = ph.cpu_s / ph.seconds * 1000
        rows.append(
            f"| {f'{ph.tabs} tab(s)' if ph.tabs else 'nothing'} | {ph.streams} "
            f"| {ph.seconds:.1f} | {ph.events} ({ph.keepalives}) | {ph.bytes} "
            f"| {ph.cpu_pct:.2f} | {per_s:.1f} | {per_s - idle:+.1f} |"
        )
    return "\n".join(rows)


async def _bench(gateway: UiGateway, requests: int, seconds: float) -> None:
    started = time.perf_counter()
    await _populate(gateway)
    for n in range(FAMILIAR_SENDS):
        await asyncio.to_thread(gateway.familiar, "send", "--session", f"sent-{n}", f"hi {n}")
    async with aiohttp.ClientSession() as login:
        cookie = await _login(login, await asyncio.to_thread(login_url, gateway))
    async with aiohttp.ClientSession(headers={"Cookie": f"familiar_ui={cookie}"}) as http:
        await _ui_chat(gateway, http)
        state = await _state(gateway)
        made = time.perf_counter() - started
        print(f"state made in {made:.0f} s: {json.dumps(state)}", flush=True)
        _check(state)
        pages = await _pages(gateway, http, requests)
        print(_page_table(pages), flush=True)
        phases = [await _phase(gateway, http, tabs, seconds) for tabs in (0, *TABS)]
    print(_cpu_table(phases))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=50, help="fetches of each page")
    parser.add_argument("--seconds", type=float, default=60.0, help="length of a CPU window")
    parser.add_argument("--max-load", type=float, default=1.5, help="wait for a lower load")
    args = parser.parse_args()
    global _max_load
    _max_load = args.max_load
    tmp = cast(pytest.TempPathFactory, _TempDirs())
    with spawn_gateway(tmp, single=False) as gateway:
        print(f"gateway pid {gateway.proc.pid} at {gateway.base_url}", flush=True)
        asyncio.run(_bench(gateway, args.requests, args.seconds))


if __name__ == "__main__":
    main()
