"""Prometheus metrics, one registry per application (nothing global)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self._series: dict[tuple[str, str, int], tuple[Counter, Histogram]] = {}
        self.requests = Counter(
            "memory_plugin_requests",
            "HTTP requests by route and status",
            ["method", "route", "status"],
            registry=self.registry,
        )
        self.request_seconds = Histogram(
            "memory_plugin_request_seconds",
            "HTTP request latency by route",
            ["method", "route"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.embed_batch_size = Histogram(
            "memory_plugin_embedder_batch_size",
            "Texts per embedder micro-batch",
            ["kind"],
            buckets=(1, 2, 4, 8, 16, 32, 64, 128),
            registry=self.registry,
        )
        self.embed_queue_seconds = Histogram(
            "memory_plugin_embedder_queue_seconds",
            "Time a text waited for its micro-batch",
            ["kind"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.embed_pending = Gauge(
            "memory_plugin_embedder_pending",
            "Texts waiting in the embedder queue",
            registry=self.registry,
        )
        self.region_seconds = Histogram(
            "memory_plugin_region_seconds",
            "Per-region store call latency",
            ["region"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.region_failures = Counter(
            "memory_plugin_region_failures",
            "Region calls that failed or missed the deadline",
            ["region"],
            registry=self.registry,
        )

    def watch(self, regions: Iterable[str], embedder_pending: Callable[[], float]) -> None:
        """Show every configured region from the start (at zero), and the live embedder queue."""
        for region in regions:
            self.region_seconds.labels(region)
            self.region_failures.labels(region)
        self.embed_pending.set_function(embedder_pending)

    def observe_batch(self, kind: str, size: int, queue_seconds: float) -> None:
        self.embed_batch_size.labels(kind).observe(size)
        self.embed_queue_seconds.labels(kind).observe(queue_seconds)

    def observe_region(self, region: str, seconds: float, failed: bool) -> None:
        self.region_seconds.labels(region).observe(seconds)
        if failed:
            self.region_failures.labels(region).inc()

    def observe_request(self, request: web.Request, status: int, seconds: float) -> None:
        """Count a request and its latency under its route (the pattern, not the path) and status."""
        resource = request.match_info.route.resource
        route = resource.canonical if resource is not None else "unmatched"
        key = (request.method, route, status)
        found = self._series.get(key)
        if found is None:  # found once: ``labels()`` takes a lock and hashes the labels
            found = self._series[key] = (
                self.requests.labels(request.method, route, str(status)),
                self.request_seconds.labels(request.method, route),
            )
        found[0].inc()
        found[1].observe(seconds)

    async def handler(self, request: web.Request) -> web.Response:
        return web.Response(body=generate_latest(self.registry), headers={"Content-Type": CONTENT_TYPE_LATEST})
