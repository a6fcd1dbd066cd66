"""The two durable queues the background workers drain (``workers``, ``infer``): long-term memories pending
their embedding, and inferring adds waiting for their LLM work.

Both are written in the transaction that causes them (``MemoryDocStore.add_memory``,
``InferQueue.apply_infer``), so a SIGKILL loses no acknowledged work.
"""

from __future__ import annotations

import abc
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from memory_plugin.agentic.stores.base import InferJob, LongTermChange, PendingEmbedding


class SharedQueue:
    #: Other server processes drain the same queues (OpenSearch): the workers poll, since those processes'
    #: writes wake nobody here, and take each entry with a lease.  SQLite belongs to one process.
    shared: bool = False


class EmbeddingQueue(SharedQueue, abc.ABC):
    @abc.abstractmethod
    async def pending_embeddings(self, limit: int, skip: Iterable[str] = ()) -> list[PendingEmbedding]:
        """Long-term docs waiting for their embedding, oldest first, outside the containers in ``skip``
        (whose model failed just now: they must not hold up everyone else's).  A shared store returns
        only those this process has just claimed."""

    async def release_embeddings(self, entries: Sequence[PendingEmbedding]) -> None:
        """Give claimed embeddings back (their model failed): anyone may try them again at once."""
        return None  # nothing is claimed in a store of one process

    @abc.abstractmethod
    async def store_embeddings(self, rows: Sequence[tuple[Any, str, np.ndarray]]) -> int:
        """Store vectors for texts that are still current; returns how many were stored."""

    @abc.abstractmethod
    async def pending_count(self) -> int: ...


class InferQueue(SharedQueue, abc.ABC):
    @abc.abstractmethod
    async def infer_job_count(self) -> int:
        """Infer jobs queued and not yet applied, held or not: the backlog health and metrics show."""

    @abc.abstractmethod
    async def infer_jobs(self, limit: int) -> list[InferJob]:
        """The oldest queued jobs, held by anyone or no one (a look: nothing is claimed)."""

    async def claim_infer_jobs(self, limit: int) -> list[InferJob]:
        """Up to ``limit`` of the oldest jobs nobody holds, now held by this process."""
        return await self.infer_jobs(limit)

    async def renew_infer_job(self, job: InferJob) -> bool:
        """Extend this process's hold on a job before the next slow step; False if another process took it."""
        return True

    @abc.abstractmethod
    async def apply_infer(
        self, job: InferJob, changes: Sequence[LongTermChange], history: Sequence[tuple[str, dict[str, Any]]]
    ) -> None:
        """Apply an infer run's changes and history and drop its job, all in one transaction; nothing if the job
        is gone (applied already) or held by another process.  Applying the same run twice changes nothing."""

    @abc.abstractmethod
    async def keep_infer_answers(self, job: InferJob) -> bool:
        """Store ``job.answers`` with the job, durably, before the run goes on: a run that fails after an LLM
        call is retried with its answer, not with another call.  False, and nothing written, if another
        process holds the job now."""

    @abc.abstractmethod
    async def count_infer_attempt(self, job: InferJob) -> None:
        """Count a failed run of a job we hold, and give it back to be tried again."""
