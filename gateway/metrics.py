"""Prometheus metrics and the health routes of the HTTP server (/healthz, /readyz, /metrics).

Counts come from what the gateway can see without core knowing about Prometheus:
a wrapper around the provider times LLM calls, a wrapper around each channel's send
counts delivered replies, and at scrape time the store is read for the queue depth and
for what was published and logged since the last scrape (inbound messages, turns, tool
calls, errors).
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Final

from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

from core.bus.sql import SqlBus
from core.bus.wakeups import Wakeups
from core.event_data import Compaction, EventType, SessionError, ToolStart, TurnStart
from core.events import Event, EventLog
from core.messages import OutboundMessage
from core.providers.base import ChatRequest, Completion, Provider, StreamEvent

__all__ = ["GatewayMetrics", "MeteredProvider", "add_health_routes"]

log = logging.getLogger(__name__)

_BATCH: Final = 2000
_MAX_BATCHES: Final = 50
_TAILED_EVENTS: Final = (
    EventType.TURN_START,
    EventType.TOOL_START,
    EventType.ERROR,
    EventType.COMPACTION,
)

Send = Callable[[OutboundMessage], Awaitable[None]]


class GatewayMetrics:
    """The gateway's metrics in a private registry (no global state)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.messages_in = Counter(
            "familiar_messages_in", "Inbound messages published", ["channel"], registry=r
        )
        self.messages_out = Counter(
            "familiar_messages_out", "Final replies delivered", ["channel", "kind"], registry=r
        )
        self.turns = Counter("familiar_turns", "Agent turns (LLM calls) started", registry=r)
        self.tool_calls = Counter("familiar_tool_calls", "Tool calls started", ["tool"], registry=r)
        self.llm_latency = Histogram(
            "familiar_llm_latency_seconds",
            "Duration of one LLM call",
            buckets=(0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300),
            registry=r,
        )
        self.queue_depth = Gauge(
            "familiar_queue_depth", "Inbound messages pending or claimed", registry=r
        )
        self.errors = Counter("familiar_errors", "Errors by kind", ["kind"], registry=r)
        self.compactions = Counter(
            "familiar_compactions",
            "History compactions by who wrote the summary (model, or the extractive fallback)",
            ["method"],
            registry=r,
        )
        self.process_up = Gauge(
            "familiar_process_up",
            "Processes of the gateway running (1) or not (0), by role and name (agent-1...)",
            ["role", "name"],
            registry=r,
        )
        self.process_restarts = Gauge(
            "familiar_process_restarts",
            "Restarts of each process of the gateway by its supervisor",
            ["role", "name"],
            registry=r,
        )
        self.process_cpu = Gauge(
            "familiar_process_cpu_seconds",
            "CPU time (user + system) used by each process of the gateway on this host",
            ["role", "name"],
            registry=r,
        )
        self.process_memory = Gauge(
            "familiar_process_resident_memory_bytes",
            "Resident memory of each process of the gateway on this host (shared pages "
            "of the forked roles count in each)",
            ["role", "name"],
            registry=r,
        )
        self._inbound_seq = 0
        self._event_id = 0
        self._forward: Wakeups | None = None
        self._llm_unsent: list[float] = []
        """LLM call durations measured in this loop iteration, to forward in one note."""

    def observe_llm(self, seconds: float) -> None:
        """One LLM call took ``seconds``: counted here, or (told to forward) sent on to
        the serving process, with the other calls that end in this loop iteration."""
        if self._forward is None:
            self.llm_latency.observe(seconds)
            return
        if not self._llm_unsent:
            try:
                asyncio.get_running_loop().call_soon(self._send_llm)
            except RuntimeError:  # no loop (a thread): send it alone, now
                self._send_on(f"llm {seconds:.6f}")
                return
        self._llm_unsent.append(seconds)

    def _send_llm(self) -> None:
        unsent, self._llm_unsent = self._llm_unsent, []
        self._send_on("llm " + " ".join(f"{seconds:.6f}" for seconds in unsent))

    def forward_to(self, wakeups: Wakeups) -> None:
        """In a process that does not serve /metrics (an agent worker, a channel in a
        process of its own): send what is measured here to the one that does (LLM
        calls are then not counted here too: nobody scrapes this process)."""
        self._forward = wakeups

    def accept_from(self, wakeups: Wakeups) -> None:
        """In the process that serves /metrics: count what other processes measured."""

        def measured(data: str, _peer: str) -> None:
            name, _, value = data.partition(" ")
            if name == "llm":
                for seconds in value.split():
                    self.llm_latency.observe(float(seconds))
            elif name == "out":
                channel, _, kind = value.partition(" ")
                self.messages_out.labels(channel=channel, kind=kind).inc()
            elif name == "error":
                self.errors.labels(kind=value).inc()

        wakeups.on("metric", measured)

    def set_processes(self, processes: list[dict[str, object]]) -> None:
        """The process table at scrape time (`familiar status`'s ``processes``)."""
        for process in processes:
            labels = {"role": str(process.get("role")), "name": str(process.get("name"))}
            up = 1 if process.get("state") == "running" else 0
            self.process_up.labels(**labels).set(up)
            restarts = process.get("restarts")
            self.process_restarts.labels(**labels).set(
                float(restarts) if isinstance(restarts, int | float) else 0.0
            )
            pid = process.get("pid")
            usage = _usage(pid) if isinstance(pid, int) and up else None
            if usage is not None:
                self.process_cpu.labels(**labels).set(usage[0])
                self.process_memory.labels(**labels).set(usage[1])

    async def start_tail(self, bus: SqlBus, events: EventLog) -> None:
        """Count only what happens from now on (call once the store is open)."""
        self._inbound_seq = await bus.newest_seq()
        self._event_id = await events.newest_id()

    async def refresh(self, bus: SqlBus, events: EventLog) -> None:
        """Read the queue depth and what was published or logged since the last call."""
        self.queue_depth.set((await bus.queue_counts()).depth)
        for _ in range(_MAX_BATCHES):
            rows = await bus.channels_after(self._inbound_seq, limit=_BATCH)
            for seq, channel in rows:
                self.messages_in.labels(channel=channel).inc()
                self._inbound_seq = seq
            if len(rows) < _BATCH:
                break
        for _ in range(_MAX_BATCHES):
            tailed = await events.tail(self._event_id, types=_TAILED_EVENTS, limit=_BATCH)
            for event in tailed:
                self._count_event(event)
                self._event_id = event.id or self._event_id
            if len(tailed) < _BATCH:
                break

    def _count_event(self, event: Event) -> None:
        data = event.data
        if isinstance(data, TurnStart):
            self.turns.inc()
        elif isinstance(data, ToolStart):
            self.tool_calls.labels(tool=data.tool).inc()
        elif isinstance(data, SessionError):
            self.errors.labels(kind=data.kind or "session").inc()
        elif isinstance(data, Compaction):
            self.compactions.labels(method=data.method).inc()

    def metered_send(self, channel: str, send: Send) -> Send:
        """``send`` that counts delivered replies and failed deliveries."""

        async def metered(message: OutboundMessage) -> None:
            try:
                await send(message)
            except Exception:
                self.errors.labels(kind="delivery").inc()
                self._send_on("error delivery")
                raise
            self.messages_out.labels(channel=channel, kind=message.kind).inc()
            self._send_on(f"out {channel} {message.kind}")

        return metered

    def _send_on(self, measured: str) -> None:
        if self._forward is not None:
            self._forward.announce(("metric", measured))

    def render(self) -> bytes:
        """The Prometheus text exposition of every metric."""
        return bytes(generate_latest(self.registry))


def _usage(pid: int) -> tuple[float, int] | None:
    """CPU seconds and resident bytes of ``pid`` from ``/proc`` (None: not here)."""
    try:
        with open(f"/proc/{pid}/stat") as stat, open(f"/proc/{pid}/statm") as statm:
            fields = stat.read().rsplit(")", 1)[1].split()
            pages = int(statm.read().split()[1])
    except (OSError, ValueError, IndexError):
        return None
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks, pages * os.sysconf("SC_PAGE_SIZE")


class MeteredProvider:
    """A Provider that times every call of the one it wraps."""

    def __init__(self, inner: Provider, metrics: GatewayMetrics) -> None:
        self.inner = inner
        self.name = inner.name
        self._metrics = metrics

    async def stream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        started = time.monotonic()
        try:
            async for event in self.inner.stream(request):
                yield event
        finally:
            self._metrics.observe_llm(time.monotonic() - started)

    async def complete(self, request: ChatRequest) -> Completion:
        started = time.monotonic()
        try:
            return await self.inner.complete(request)
        finally:
            self._metrics.observe_llm(time.monotonic() - started)

    async def aclose(self) -> None:
        await self.inner.aclose()


def add_health_routes(
    app: web.Application,
    *,
    metrics: GatewayMetrics,
    bus: SqlBus,
    events: EventLog,
    not_ready: Callable[[], Awaitable[list[str]]],
    details: Callable[[], dict[str, Any]] | None = None,
    processes: Callable[[], Awaitable[list[dict[str, object]]]] | None = None,
) -> None:
    """Mount ``GET /healthz``, ``GET /readyz`` and ``GET /metrics`` on ``app``.

    Args:
        app: the gateway's HTTP application (before it is started).
        metrics: what ``/metrics`` exposes.
        bus: asked for queue depth and new messages at scrape time.
        events: tailed for turns, tool calls and errors at scrape time.
        not_ready: the reasons the gateway is not ready (empty when it is).
        details: more to say in ``/readyz`` without changing readiness (e.g. the MCP
            servers that failed); added to the body when not empty.
        processes: the gateway's process table (per-role gauges), read at scrape time.
    """

    async def healthz(_request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def readyz(_request: web.Request) -> web.Response:
        reasons = await not_ready()
        extra = details() if details is not None else {}
        if reasons:
            body = {"status": "not ready", "reasons": reasons, **extra}
            return web.json_response(body, status=503)
        return web.json_response({"status": "ready", **extra})

    async def scrape(_request: web.Request) -> web.Response:
        try:
            await metrics.refresh(bus, events)
            if processes is not None:
                metrics.set_processes(await processes())
        except Exception:
            log.exception("refreshing metrics from the store failed")
            metrics.errors.labels(kind="metrics").inc()
        return web.Response(body=metrics.render(), headers={"Content-Type": CONTENT_TYPE_LATEST})

    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", scrape)
