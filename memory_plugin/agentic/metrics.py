"""Prometheus metrics of agentic memory, registered on the application's registry."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram

from memory_plugin.metrics import LATENCY_BUCKETS


class AgenticMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        registry = registry or CollectorRegistry()
        self.infer_runs = Counter(
            "memory_plugin_agentic_infer_runs",
            "Inferring adds processed, by outcome (applied or error)",
            ["outcome"],
            registry=registry,
        )
        self.infer_seconds = Histogram(
            "memory_plugin_agentic_infer_seconds",
            "Time to process one inferring add (LLM calls included)",
            buckets=LATENCY_BUCKETS + (30.0, 60.0),
            registry=registry,
        )
        self.long_term_changes = Counter(
            "memory_plugin_agentic_long_term_changes",
            "Long-term memory changes applied by infer, by event",
            ["event"],
            registry=registry,
        )
        self.embedded = Counter(
            "memory_plugin_agentic_embedded",
            "Long-term memories embedded in the background",
            registry=registry,
        )
        self.searches = Counter(
            "memory_plugin_agentic_searches",
            "Semantic and hybrid searches over long-term memory",
            ["kind"],
            registry=registry,
        )
