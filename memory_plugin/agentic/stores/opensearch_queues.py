"""The OpenSearch agentic store's two queues, which every server process in front of the cluster drains:
infer jobs (``R-ml-am-infer-jobs``) and long-term memories pending their embedding (``embedding_pending``).

Each entry is taken with a lease (``memory_plugin.leases``): a job's in its own
document (``lease_holder``, ``lease_until``), a pending memory's in
``embedding_lease_until``.  A job's holder renews its lease before every model
call and before applying; an embedding is stored only if the memory's text is
still the one embedded, so one embedded twice (its lease ran out) is stored once.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
from opensearchpy import AsyncOpenSearch
from opensearchpy.exceptions import ConflictError, NotFoundError

from memory_plugin.agentic.stores.base import InferJob, PendingEmbedding, memory_text, normalised, owner_of
from memory_plugin.agentic.stores.opensearch_documents import PENDING, if_unchanged
from memory_plugin.leases import (
    RELEASED,
    Lease,
    claim,
    conditional_bulk,
    ensure_lease_fields,
    leased,
    renew,
    unleased,
)
from memory_plugin.opensearch_client import get_document

#: Besides one model call, what a job's holder does between two renewals of its lease (a few reads, a
#: k-NN search, one bulk write), with room for a slow cluster.
LEASE_MARGIN_SECONDS = 60.0
#: Where a pending long-term memory's lease is written.
EMBEDDING_LEASE = "embedding_lease_until"
EMBEDDING_LEASE_MAPPINGS = {EMBEDDING_LEASE: {"type": "double"}}


def lease_seconds(model_timeout: float) -> float:
    """How long a claim holds an infer job or a batch of pending embeddings.

    Safe because a job's holder renews the lease before every model call (the
    extraction and decision LLM calls, each fact's query embedding) and before
    applying, and each call gives up after ``model_timeout`` (the larger of
    ``agentic.llm.timeout`` and ``ml.connector_timeout``): between renewals it
    makes one such call and a few store requests, well within the margin.  A
    batch of embeddings is one model call per container; past its lease it is
    at worst embedded twice, and stored once.
    """
    return model_timeout + LEASE_MARGIN_SECONDS


def unclaimed(source: Mapping[str, Any]) -> dict[str, Any]:
    """A long-term memory's source without its embedding lease: what a write that ends or restarts its
    embedding (the vector stored, or a new text to embed) leaves, so that the memory is anyone's to embed."""
    return {key: value for key, value in source.items() if key != EMBEDDING_LEASE}


def read_job(hit: Mapping[str, Any], lease: Lease | None = None) -> InferJob:
    source = hit["_source"]
    return InferJob(
        hit["_id"],
        owner_of(source["tenant_id"], source["owner_id"]),
        source["memory_container_id"],
        source["request"],
        source.get("attempts", 0),
        lease,
        dict(source.get("llm_answers") or {}),
    )


class OpenSearchQueues:
    """The claims on both queues.  It holds no client: the store passes its own to every call."""

    def __init__(self, job_index: str, long_term_indices: str, seconds: float) -> None:
        self.job_index = job_index
        self.long_term_indices = long_term_indices
        #: How long a claim holds an entry (tests shorten it).
        self.lease_seconds = seconds

    async def open(self, client: AsyncOpenSearch) -> None:
        """Map the lease fields in indices created before leases existed."""
        await ensure_lease_fields(client, self.job_index)
        await ensure_lease_fields(client, self.long_term_indices, EMBEDDING_LEASE_MAPPINGS)

    # -- infer jobs -----------------------------------------------------------------------

    async def claim_jobs(self, client: AsyncOpenSearch, limit: int) -> list[InferJob]:
        now = time.time()
        body = {
            "size": limit,
            "sort": [{"created_time": "asc"}],
            "query": {"bool": {"filter": [unleased(now)]}},
            "seq_no_primary_term": True,
        }
        hits = (await client.search(index=self.job_index, body=body))["hits"]["hits"]
        return [read_job(hit, lease) for hit, lease in await claim(client, hits, leased(now, self.lease_seconds))]

    async def renew_job(self, client: AsyncOpenSearch, job: InferJob) -> bool:
        if job.lease is None:
            return True
        return await renew(client, self.job_index, str(job.job_id), job.lease, leased(time.time(), self.lease_seconds))

    async def keep_answers(self, client: AsyncOpenSearch, job: InferJob) -> bool:
        """The job's answers into its document, on the condition of our lease (renewed with them).  Not
        refreshed: a claim is conditional on the version its search read, so no process can claim the job
        from a version without them."""
        fields = {"llm_answers": job.answers}
        if job.lease is None:
            try:
                await client.update(index=self.job_index, id=str(job.job_id), body={"doc": fields})
            except NotFoundError:
                pass  # applied meanwhile: nothing left to retry
            return True
        return await renew(
            client, self.job_index, str(job.job_id), job.lease, {**fields, **leased(time.time(), self.lease_seconds)}
        )

    async def count_attempt(self, client: AsyncOpenSearch, job: InferJob) -> None:
        fields = {"attempts": job.attempts + 1, **RELEASED}
        if job.lease is not None:  # lost meanwhile: the new holder counts its own attempts
            await renew(client, self.job_index, str(job.job_id), job.lease, fields, refresh=True)
            return
        await client.update(index=self.job_index, id=str(job.job_id), body={"doc": fields}, refresh="true")

    # -- pending embeddings -------------------------------------------------------------------

    async def claim_embeddings(
        self, client: AsyncOpenSearch, limit: int, skip: Iterable[str]
    ) -> list[PendingEmbedding]:
        now = time.time()
        query = {
            "bool": {
                "filter": [PENDING, unleased(now, EMBEDDING_LEASE)],
                "must_not": [{"terms": {"memory_container_id": sorted(skip)}}],
            }
        }
        body = {
            "size": limit,
            "_source": ["memory", "memory_container_id", "tenant_id", "owner_id"],
            "query": query,
            "sort": [{"created_time": "asc"}],
            "seq_no_primary_term": True,
        }
        result = await client.search(
            index=self.long_term_indices, body=body, ignore_unavailable=True, allow_no_indices=True
        )
        won = await claim(client, result["hits"]["hits"], {EMBEDDING_LEASE: now + self.lease_seconds})
        return [
            PendingEmbedding(
                (hit["_index"], hit["_id"]),
                owner_of(hit["_source"]["tenant_id"], hit["_source"]["owner_id"]),
                hit["_source"]["memory_container_id"],
                memory_text(hit["_source"]),
                lease,
            )
            for hit, lease in won
        ]

    async def release_embeddings(self, client: AsyncOpenSearch, entries: Sequence[PendingEmbedding]) -> None:
        actions: list[dict[str, Any]] = []
        for entry in entries:
            if entry.lease is not None:
                index, memory_id = entry.key
                actions += [
                    {"update": {"_index": index, "_id": memory_id, **entry.lease.condition()}},
                    {"doc": {EMBEDDING_LEASE: 0.0}},
                ]
        await conditional_bulk(client, actions, refresh=True)

    async def pending_count(self, client: AsyncOpenSearch) -> int:
        result = await client.count(
            index=self.long_term_indices, body={"query": PENDING}, ignore_unavailable=True, allow_no_indices=True
        )
        return int(result["count"])

    async def store_embeddings(self, client: AsyncOpenSearch, rows: Sequence[tuple[Any, str, np.ndarray]]) -> int:
        """Each vector onto its memory, unless the memory changed since its text was read (then it is pending)."""
        stored = 0
        for (index, memory_id), text, vector in rows:
            found = await get_document(client, index, memory_id)
            if found is None or not found["_source"].get("embedding_pending") or memory_text(found["_source"]) != text:
                continue
            unit = [float(x) for x in normalised(vector)]
            source = {**unclaimed(found["_source"]), "embedding_pending": False, "memory_embedding": unit}
            try:
                await client.index(index=index, id=memory_id, body=source, refresh="true", **if_unchanged(found))
            except (ConflictError, NotFoundError):
                continue  # changed meanwhile: the newer text is pending
            stored += 1
        return stored

    async def jobs(self, client: AsyncOpenSearch, limit: int) -> list[InferJob]:
        """The oldest queued infer jobs, claimed or not."""
        body = {"size": limit, "sort": [{"created_time": "asc"}], "query": {"match_all": {}}}
        result = await client.search(index=self.job_index, body=body)
        return [read_job(hit) for hit in result["hits"]["hits"]]
