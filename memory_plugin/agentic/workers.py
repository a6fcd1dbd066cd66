"""The background loops: what ml-commons does off the request path, drained from durable queues.

Both queues (long-term memories marked pending, infer jobs) are written in the
transaction that caused them, and every worker drains its queue at start, so a
SIGKILL loses no acknowledged work (the loop: ``memory_plugin.background``).
This module has the **embedder drain**, which embeds pending long-term
memories in micro-batches, each container's with its own model; ``infer`` has
the infer worker.

On a shared store (OpenSearch, several server processes) the workers also
poll: another process's writes wake nobody here, and a process that died
leaves entries whose leases run out for the others to take.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence

import numpy as np

from memory_plugin.agentic.llm import ContainerModels
from memory_plugin.agentic.metrics import AgenticMetrics
from memory_plugin.agentic.models import EmbeddingChoice
from memory_plugin.agentic.stores.base import PendingEmbedding
from memory_plugin.agentic.stores.containers import ContainerStore
from memory_plugin.agentic.stores.queues import EmbeddingQueue, InferQueue
from memory_plugin.background import Worker

log = logging.getLogger("memory_plugin.agentic")

EMBED_BATCH = 64
#: A container whose embedding model failed is tried again after this long.
EMBED_RETRY_SECONDS = 5.0
#: How often a worker over a shared store looks for work it was not woken for.
POLL_SECONDS = 1.0


class EmbeddingWorker(Worker):
    """Embeds the long-term memories marked pending (after an infer run or an update of their text)."""

    def __init__(
        self, queue: EmbeddingQueue, models: ContainerModels, metrics: AgenticMetrics, *, containers: ContainerStore
    ) -> None:
        """``containers``: where a pending memory's container names its embedding model."""
        super().__init__("agentic-embed", POLL_SECONDS if queue.shared else None)
        self.queue = queue
        self.containers = containers
        self.models = models
        self.metrics = metrics
        self._lock = asyncio.Lock()

    async def drain(self) -> None:
        """Embed what is pending, each container's with its own model.  A container whose model fails (a
        remote model down, or answering the wrong dimension) keeps its memories pending and is skipped
        until a retry a little later, so that it holds up no other container."""
        async with self._lock:
            failed: set[str] = set()
            while pending := await self.queue.pending_embeddings(EMBED_BATCH, skip=failed):
                groups: dict[str, list[PendingEmbedding]] = {}
                for entry in pending:
                    if entry.container_id not in failed:  # a store may skip only so many containers
                        groups.setdefault(entry.container_id, []).append(entry)
                if not groups:
                    break
                for container_id, group in groups.items():
                    try:
                        vectors = await self._passages(group)
                    except asyncio.CancelledError:
                        raise
                    except Exception as error:
                        log.warning("embedding memory container %s failed, retrying later: %s", container_id, error)
                        self.metrics.embed_failures.inc()
                        failed.add(container_id)
                        await self.queue.release_embeddings(group)
                        continue
                    stored = await self.queue.store_embeddings(
                        [(entry.key, entry.text, vector) for entry, vector in zip(group, vectors)]
                    )
                    self.metrics.embedded.inc(stored)
            if failed:
                asyncio.get_running_loop().call_later(EMBED_RETRY_SECONDS, self.wake)

    async def _passages(self, group: Sequence[PendingEmbedding]) -> np.ndarray:
        owner, container_id = group[0].owner, group[0].container_id
        container = await self.containers.find_container(owner.organization_id, container_id)
        if container is None:
            raise LookupError(f"memory container {container_id} is gone")
        choice = EmbeddingChoice.of(container.source.get("configuration", {}))
        return await self.models.passages(container.owner or owner, choice, [entry.text for entry in group])


async def settled(
    workers: Sequence[Worker], *, jobs: InferQueue, embeddings: EmbeddingQueue, timeout: float = 60.0
) -> None:
    """Wait until no embedding or infer work is queued (tests and benchmarks)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        # On OpenSearch a bulk that adds memories and drops their job becomes visible shard by shard,
        # so the queues alone can look empty mid-write: a drain in progress or pending is not settled.
        busy = any(worker.busy for worker in workers)
        # Jobs first: a job's changes (pending embeddings) commit in the transaction that drops it.
        if not busy and not await jobs.infer_jobs(1) and not await embeddings.pending_count():
            return
        await asyncio.sleep(0.02)
    raise TimeoutError("agentic background work did not settle")
