"""Long-term memory in the OpenSearch agentic store: what an infer run writes, and the ranked searches over it.

An infer run is applied as **one** bulk request that ends with the deletion of its queued job: this process
dying cannot split it (OpenSearch executes a bulk it received), and a re-run only happens for a job whose bulk
never arrived.  Unlike SQLite, OpenSearch itself could still reject single items of a bulk; such failures are
logged.  An infer UPDATE in the run's bulk is conditional on the memory as it was read; one that lost such a
race is merged again right after it."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from opensearchpy import AsyncOpenSearch

from memory_plugin.agentic.models import HISTORY, LONG_TERM
from memory_plugin.agentic.stores.base import InferJob, LongTermChange, StoredDoc
from memory_plugin.agentic.stores.opensearch_documents import if_unchanged, stored_doc, until_unchanged
from memory_plugin.agentic.stores.opensearch_queues import unclaimed
from memory_plugin.auth import Principal
from memory_plugin.errors import Conflict
from memory_plugin.leases import conditional_bulk
from memory_plugin.opensearch_client import get_document

log = logging.getLogger("memory_plugin.agentic")


class OpenSearchAgenticStore(Protocol):
    """What applying an infer run uses of ``opensearch.OpenSearchAgenticStore``."""

    job_index: str

    @property
    def client(self) -> AsyncOpenSearch: ...

    async def renew_infer_job(self, job: InferJob) -> bool: ...

    async def _index(self, owner: Principal, container_id: str, memory_type: str) -> str | None: ...

    def _source(self, owner: Principal, doc: Mapping[str, Any], memory_type: str) -> dict[str, Any]: ...

    async def _get_owned(
        self, index: str | None, owner: Principal, doc_id: str, container_id: str | None = None
    ) -> dict[str, Any] | None: ...

    async def _container_kept(self, owner: Principal, container_id: str, written: list[str]) -> bool: ...


def _infer_updated(found: Mapping[str, Any], change: LongTermChange) -> dict[str, Any]:
    """The long-term memory ``found`` after an infer UPDATE: re-embedded, whoever held its embedding before."""
    current = {key: value for key, value in unclaimed(found["_source"]).items() if key != "memory_embedding"}
    return {**change.applied_to(current), "embedding_pending": True}


async def apply_infer(
    store: OpenSearchAgenticStore,
    job: InferJob,
    changes: Sequence[LongTermChange],
    history: Sequence[tuple[str, dict[str, Any]]],
) -> None:
    """``AgenticStore.apply_infer`` on ``store``."""
    # Still ours (renewed, so that the writes below have the whole lease), and not applied already.
    if job.lease is not None and not await store.renew_infer_job(job):
        return
    if job.lease is None and await get_document(store.client, store.job_index, str(job.job_id)) is None:
        return
    owner, container_id = job.owner, job.container_id
    items: list[list[dict[str, Any]]] = []  # the bulk's items, each its action and document lines
    updates: dict[int, LongTermChange] = {}  # by their item
    long_term = await store._index(owner, container_id, LONG_TERM) if changes else None
    for change in changes:
        if change.event == "ADD" and change.doc is not None and long_term:
            items.append(
                [
                    {"create": {"_index": long_term, "_id": change.memory_id}},
                    store._source(owner, change.doc, LONG_TERM),
                ]
            )
            continue
        found = await store._get_owned(long_term, owner, change.memory_id, container_id)
        if found is None:
            continue
        if change.event == "UPDATE":
            updates[len(items)] = change
            meta = {"_index": long_term, "_id": change.memory_id, **if_unchanged(found)}
            items.append([{"index": meta}, _infer_updated(found, change)])
        elif change.event == "DELETE":
            items.append([{"delete": {"_index": long_term, "_id": change.memory_id}}])
    history_index = await store._index(owner, container_id, HISTORY) if history else None
    if history_index:
        for history_id, doc in history:
            items.append([{"create": {"_index": history_index, "_id": history_id}}, store._source(owner, doc, HISTORY)])
    held = job.lease.condition() if job.lease else {}
    items.append([{"delete": {"_index": store.job_index, "_id": str(job.job_id), **held}}])
    # A create that finds its id taken was applied before (ids are derived from the job): not a failure.
    results = await conditional_bulk(store.client, [line for item in items for line in item], refresh=True)
    for item, change in updates.items():
        if results[item] is None and long_term is not None:
            await _update_again(store, long_term, owner, container_id, change)
    written = [index for index in (long_term, history_index) if index]
    await store._container_kept(owner, container_id, written)


async def _update_again(
    store: OpenSearchAgenticStore, index: str, owner: Principal, container_id: str, change: LongTermChange
) -> None:
    """An infer UPDATE whose bulk item lost a race (the memory was updated after it was read): merged into
    the memory as it is now, so that neither update is lost."""

    async def attempt() -> None:
        found = await store._get_owned(index, owner, change.memory_id, container_id)
        if found is not None:  # deleted meanwhile: nothing to update
            body = _infer_updated(found, change)
            await store.client.index(index=index, id=change.memory_id, body=body, refresh="true", **if_unchanged(found))

    try:
        await until_unchanged(attempt, f"memory [{change.memory_id}]")
    except Conflict as error:  # the job is applied already: nobody waits for this one to be tried again
        log.warning("infer UPDATE of %s not applied: %s", change.memory_id, error)


async def ranked(
    client: AsyncOpenSearch, index: str, clause: dict[str, Any], filters: list[dict[str, Any]], k: int
) -> list[tuple[StoredDoc, float]]:
    """Top ``k`` long-term hits of ``clause`` in ``index``, inside ``filters``."""
    body = {
        "size": k,
        "_source": {"excludes": ["memory_embedding"]},
        "seq_no_primary_term": True,
        "version": True,
        "query": {"bool": {"must": [clause], "filter": filters}},
    }
    result = await client.search(index=index, body=body)
    return [(stored_doc(hit), float(hit["_score"])) for hit in result["hits"]["hits"]]
