"""Forgetting working memories on OpenSearch: the cascade of ``sources``, step by step and idempotent.

There is no transaction across indices, and other server processes run infer jobs meanwhile, so the order is
what makes it safe:

1. the working docs are deleted first (refreshed).  An infer run of one of them that applies after this point
   finds its source gone when it checks, after its own refreshed bulk, and forgets it again
   (``InferWorker._forget_if_source_gone``); a run that applied before is seen by step 3;
2. their queued infer jobs are deleted (their requests quote the messages);
3. the long-term memories citing them, then the history citing those or them, are planned and rewritten;
   a write that loses a race with another writer (409) makes the whole cascade run again.

A cascade cut short (the process died) is finished by running it again: a later ``DELETE`` of the same
working memory answers 404 but still runs it, and finds only what is left.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from opensearchpy import AsyncOpenSearch

from memory_plugin.agentic.models import HISTORY, LONG_TERM, WORKING
from memory_plugin.agentic.stores.opensearch_documents import ADDED_FIELDS
from memory_plugin.agentic.stores.opensearch_queues import unclaimed
from memory_plugin.agentic.stores.sources import SOURCES, Forgotten, plan
from memory_plugin.leases import conditional_bulk
from memory_plugin.opensearch_client import delete_by_query

#: A cascade that keeps losing races with other writers gives up after this many rounds (and can be re-run).
ROUNDS = 5
SOURCE_ID = f"{SOURCES}.working_memory_id"


async def map_added_fields(client: AsyncOpenSearch, index: str, mappings: Mapping[str, Any]) -> None:
    """Map the fields added since an index was made (the hidden sources): adding a field is always allowed."""
    added = {name: value for name, value in mappings["properties"].items() if name in ADDED_FIELDS}
    if added:
        await client.indices.put_mapping(index=index, body={"properties": added})


async def _raw(
    client: AsyncOpenSearch, index: str, filters: list[dict[str, Any]]
) -> dict[str, tuple[Mapping[str, Any], dict[str, Any]]]:
    """id -> (its version condition, its raw source without the vector)."""
    query = {"bool": {"filter": filters}}
    found: dict[str, tuple[Mapping[str, Any], dict[str, Any]]] = {}
    body = {"query": query, "_source": {"excludes": ["memory_embedding"]}, "seq_no_primary_term": True}
    result = await client.search(
        index=index, body={**body, "size": 10000}, ignore_unavailable=True, allow_no_indices=True
    )
    for hit in result["hits"]["hits"]:
        condition = {"if_seq_no": hit["_seq_no"], "if_primary_term": hit["_primary_term"]}
        found[hit["_id"]] = (condition, hit["_source"])
    return found


async def forget(
    client: AsyncOpenSearch,
    indices: Mapping[str, str],
    job_index: str,
    scope: list[dict[str, Any]],
    ids: list[str],
) -> Forgotten:
    """``indices``: the container's index of each memory type; ``scope``: its owner and container filters."""
    ids = list(dict.fromkeys(ids))
    if not ids:
        return Forgotten()
    gone = await delete_by_query(client, indices[WORKING], {"bool": {"filter": [*scope, {"ids": {"values": ids}}]}})
    jobs = await delete_by_query(
        client, job_index, {"bool": {"filter": [*scope, {"terms": {"working_memory_id": ids}}]}}
    )
    report = Forgotten(working=sorted(hit["_id"] for hit in gone), infer_jobs_deleted=len(jobs))
    for _ in range(ROUNDS):
        long_term = await _raw(client, indices[LONG_TERM], [*scope, {"terms": {SOURCE_ID: ids}}])
        history: dict[str, tuple[Mapping[str, Any], dict[str, Any]]] = {}
        cites = [{"terms": {SOURCE_ID: ids}}] + ([{"terms": {"memory_id": list(long_term)}}] if long_term else [])
        history = await _raw(client, indices[HISTORY], [*scope, {"bool": {"should": cites, "minimum_should_match": 1}}])
        decided = plan(
            set(ids),
            [(key, source) for key, (_, source) in long_term.items()],
            [(key, source) for key, (_, source) in history.items()],
        )
        actions: list[dict[str, Any]] = []
        for memory_id in decided.delete_long_term:
            actions.append({"delete": {"_index": indices[LONG_TERM], "_id": memory_id, **long_term[memory_id][0]}})
        for memory_id, doc in decided.rewrite_long_term.items():
            condition, current = long_term[memory_id]
            target = {"_index": indices[LONG_TERM], "_id": memory_id, **condition}
            if doc.get("memory") == current.get("memory"):  # the vector stays: a partial update keeps it
                actions += [{"update": target}, {"doc": {SOURCES: doc[SOURCES]}}]
            else:
                actions += [{"index": target}, {**unclaimed(doc), "embedding_pending": True}]
        for history_id in decided.delete_history:
            actions.append({"delete": {"_index": indices[HISTORY], "_id": history_id, **history[history_id][0]}})
        for history_id, doc in decided.rewrite_history.items():
            actions += [{"index": {"_index": indices[HISTORY], "_id": history_id, **history[history_id][0]}}, doc]
        results = await conditional_bulk(client, actions, refresh=True)
        report.add(decided.report([], 0))
        if all(result is not None for result in results):
            return report
    return report
