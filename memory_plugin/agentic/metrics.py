"""Prometheus metrics of agentic memory, registered on the application's registry."""

from __future__ import annotations

from functools import partial

from prometheus_client import CollectorRegistry, Counter, Histogram

from memory_plugin.metrics import LATENCY_BUCKETS


class AgenticMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        registry = registry or CollectorRegistry()
        # Every name is memory_plugin_agentic_<name>.
        counter = partial(Counter, namespace="memory_plugin", subsystem="agentic", registry=registry)
        histogram = partial(Histogram, namespace="memory_plugin", subsystem="agentic", registry=registry)
        self.infer_runs = counter("infer_runs", "Inferring adds processed, by outcome (applied or error)", ["outcome"])
        self.infer_seconds = histogram(
            "infer_seconds",
            "Time to process one inferring add (LLM calls included)",
            buckets=LATENCY_BUCKETS + (30.0, 60.0),
        )
        self.long_term_changes = counter(
            "long_term_changes", "Long-term memory changes applied by infer, by event", ["event"]
        )
        self.embedded = counter("embedded", "Long-term memories embedded in the background")
        self.embed_failures = counter(
            "embed_failures", "Background embedding batches whose model failed (kept pending, tried again)"
        )
        self.searches = counter("searches", "Semantic and hybrid searches over long-term memory", ["kind"])
