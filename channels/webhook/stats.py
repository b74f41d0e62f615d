"""Counts of webhook requests and callbacks, exported as Prometheus metrics.

``/metrics`` needs no authentication, so the counts carry no hook names: a hook's name
is half of what a caller needs to reach it (its path), and the list of hooks says what
the gateway is connected to. The log lines (private to the operator) name the hook.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

__all__ = ["WebhookStats"]


class WebhookStats(Collector):
    """``familiar_webhook_requests_total{status}`` and
    ``familiar_webhook_callbacks_total{outcome}``; registered by the gateway."""

    def __init__(self) -> None:
        self.requests: Counter[str] = Counter()
        self.callbacks: Counter[str] = Counter()

    def request(self, status: int) -> None:
        self.requests[str(status)] += 1

    def callback(self, outcome: str) -> None:
        self.callbacks[outcome] += 1

    def collect(self) -> Iterable[Metric]:
        requests = CounterMetricFamily(
            "familiar_webhook_requests",
            "Webhook requests answered, by HTTP status",
            labels=["status"],
        )
        for status, n in sorted(self.requests.items()):
            requests.add_metric([status], n)
        callbacks = CounterMetricFamily(
            "familiar_webhook_callbacks",
            "Webhook callback attempts, by outcome (delivered, failed)",
            labels=["outcome"],
        )
        for outcome, n in sorted(self.callbacks.items()):
            callbacks.add_metric([outcome], n)
        return [requests, callbacks]
