"""Prometheus metrics, one registry per application (nothing global), and which process is answering."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest

log = logging.getLogger("memory_plugin")

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

        self.process = Gauge(
            "memory_plugin_process",
            "Always 1: which server process these numbers are from (several may serve one port or cluster)",
            ["hostname", "pid", "node_name"],
            registry=self.registry,
        )
        self.agentic_pending = Gauge(
            "memory_plugin_agentic_pending_embeddings",
            "Long-term memories waiting for their embedding, as the agentic store counts them (every process's)",
            registry=self.registry,
        )
        self.agentic_infer_jobs = Gauge(
            "memory_plugin_agentic_infer_jobs",
            "Inferring adds whose LLM run is not yet applied, as the agentic store counts them (every process's)",
            registry=self.registry,
        )

    def identify(self, node_name: str) -> dict[str, Any]:
        """Label this registry with the process serving it (call it in the process that serves)."""
        identity = process_identity(node_name)
        self.process.clear()
        self.process.labels(identity["hostname"], str(identity["pid"]), node_name).set(1)
        return identity

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


def process_identity(node_name: str) -> dict[str, Any]:
    """Which process answered: with several workers or hosts behind one address, health and metrics say so."""
    return {"hostname": socket.gethostname(), "pid": os.getpid(), "node_name": node_name}


class Sampled:
    """A number a store reports (a queue's length), read again in the background at most every
    ``every`` seconds while someone asks, so that health and metrics never wait for a store."""

    def __init__(self, read: Callable[[], Awaitable[int]], every: float = 1.0) -> None:
        self._read = read
        self.every = every
        self.value: int | None = None
        self._read_at = float("-inf")
        self._reading: asyncio.Task[None] | None = None

    async def refresh(self) -> None:
        self._read_at = time.monotonic()
        try:
            self.value = await self._read()
        except Exception as error:  # keep the last value; the store's own errors are reported elsewhere
            log.warning("reading a backlog failed: %s", error)

    def current(self) -> int | None:
        """The last value read, and a fresh read started if it is older than ``every``."""
        if time.monotonic() - self._read_at >= self.every and (self._reading is None or self._reading.done()):
            self._reading = asyncio.ensure_future(self.refresh())
        return self.value

    async def close(self) -> None:
        if self._reading is not None:
            self._reading.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reading
