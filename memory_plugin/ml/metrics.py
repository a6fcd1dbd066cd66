"""Prometheus metrics of remote model calls, registered on the application's registry."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram

from memory_plugin.metrics import LATENCY_BUCKETS


class MLMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        registry = registry or CollectorRegistry()
        self.remote_calls = Counter(
            "remote_calls",
            "Remote model calls, by organisation and outcome (ok, error, throttled)",
            ["organization", "outcome"],
            namespace="memory_plugin",
            subsystem="ml",
            registry=registry,
        )
        self.remote_seconds = Histogram(
            "remote_seconds",
            "Time one remote model call took",
            namespace="memory_plugin",
            subsystem="ml",
            registry=registry,
            buckets=LATENCY_BUCKETS + (30.0, 60.0),
        )
