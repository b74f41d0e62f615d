"""Counts of webhook requests and callbacks, exported as Prometheus metrics."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

__all__ = ["WebhookStats"]


class WebhookStats(Collector):
    """``familiar_webhook_requests_total{hook,status}`` and
    ``familiar_webhook_callbacks_total{hook,outcome}``; registered by the gateway."""

    def __init__(self) -> None:
        self.requests: Counter[tuple[str, str]] = Counter()
        self.callbacks: Counter[tuple[str, str]] = Counter()

    def request(self, hook: str, status: int) -> None:
        self.requests[hook, str(status)] += 1

    def callback(self, hook: str, outcome: str) -> None:
        self.callbacks[hook, outcome] += 1

    def collect(self) -> Iterable[Metric]:
        requests = CounterMetricFamily(
            "familiar_webhook_requests",
            "Webhook requests answered, by hook and HTTP status",
            labels=["hook", "status"],
        )
        for (hook, status), n in sorted(self.requests.items()):
            requests.add_metric([hook, status], n)
        callbacks = CounterMetricFamily(
            "familiar_webhook_callbacks",
            "Webhook callback attempts, by hook and outcome (delivered, failed)",
            labels=["hook", "outcome"],
        )
        for (hook, outcome), n in sorted(self.callbacks.items()):
            callbacks.add_metric([hook, outcome], n)
        return [requests, callbacks]
