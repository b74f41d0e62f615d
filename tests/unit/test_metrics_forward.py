"""LLM call durations measured in a worker reach the process serving /metrics."""

from __future__ import annotations

import asyncio

from core.bus.wakeups import Handler
from gateway.metrics import GatewayMetrics


class _Relay:
    """Wake-ups between two processes, in one: announce calls the other side's handlers."""

    def __init__(self) -> None:
        self.notes: list[tuple[str, str]] = []
        self._handlers: dict[str, list[Handler]] = {}

    def announce(self, *notes: tuple[str, str]) -> None:
        for topic, data in notes:
            self.notes.append((topic, data))
            for handler in self._handlers.get(topic, []):
                handler(data, "worker")

    def send_to(self, peer: str, *notes: tuple[str, str]) -> bool:
        self.announce(*notes)
        return True

    def on(self, topic: str, handler: Handler) -> None:
        self._handlers.setdefault(topic, []).append(handler)


def _count(metrics: GatewayMetrics) -> float:
    value = metrics.registry.get_sample_value("familiar_llm_latency_seconds_count")
    return value or 0.0


async def test_the_calls_of_one_loop_iteration_go_in_one_note_and_all_are_counted() -> None:
    relay = _Relay()
    worker, front = GatewayMetrics(), GatewayMetrics()
    worker.forward_to(relay)
    front.accept_from(relay)
    for seconds in (0.25, 0.5, 2.0):
        worker.observe_llm(seconds)
    await asyncio.sleep(0)
    worker.observe_llm(0.125)
    await asyncio.sleep(0)
    assert relay.notes == [("metric", "llm 0.250000 0.500000 2.000000"), ("metric", "llm 0.125000")]
    assert _count(front) == 4
    assert front.registry.get_sample_value("familiar_llm_latency_seconds_sum") == 2.875
    assert _count(worker) == 0  # nobody scrapes a worker: counted once, by the front


def test_a_process_serving_metrics_counts_its_own_calls() -> None:
    metrics = GatewayMetrics()
    metrics.observe_llm(0.5)
    assert _count(metrics) == 1
