"""The wire shapes of agentic memory answers: OpenSearch's write and by-query responses, containers and memories
as ml-commons shows them, and ranked long-term hits."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from memory_plugin.agentic.models import LONG_TERM, OWNER_ROLES, WORKING
from memory_plugin.agentic.results import (
    AddMemoriesResult,
    ContainerCreated,
    DeletedByQuery,
    DeletedMemory,
    FoundMemory,
    Hits,
    RankedMemories,
    SessionCreated,
    Written,
)
from memory_plugin.agentic.stores.base import StoredDoc
from memory_plugin.dsl import DocumentHit, DocumentResults, search_response

SHARDS = {"total": 2, "successful": 1, "failed": 0}


def took(started: float) -> int:
    """Milliseconds since ``started`` (a ``time.perf_counter()``)."""
    return int((time.perf_counter() - started) * 1000)


def write_response(index: str, stored: StoredDoc, result: str) -> dict[str, Any]:
    return {
        "_index": index,
        "_id": stored.id,
        "_version": stored.version,
        "result": result,
        "forced_refresh": True,
        "_shards": SHARDS,
        "_seq_no": stored.seq_no,
        "_primary_term": 1,
    }


def written_view(written: Written) -> dict[str, Any]:
    response = write_response(written.index, written.doc, written.result)
    if not written.forced_refresh:
        del response["forced_refresh"]
    return response


def created_container_view(created: ContainerCreated) -> dict[str, str]:
    return {"memory_container_id": created.container_id, "status": "created"}


def hits_view(found: Hits) -> dict[str, Any]:
    """A query DSL search's answer, each hit with its doc's version."""
    return search_response(found.results, found.took, index=found.index, hit_extras=hit_extras(found.docs).__getitem__)


def added_view(added: AddMemoriesResult) -> dict[str, str]:
    """ml-commons' add response: the session id first, when the add has one."""
    view = {"session_id": added.session_id} if added.session_id is not None else {}
    return {**view, "working_memory_id": added.working_memory_id}


def hit_extras(docs: Sequence[StoredDoc]) -> dict[str, dict[str, Any]]:
    """What a search hit shows of each doc beside its source, by id."""
    return {doc.id: {"_version": doc.version, "_seq_no": doc.seq_no, "_primary_term": 1} for doc in docs}


def by_query_view(done: DeletedByQuery) -> dict[str, Any]:
    matched, deleted = done.matched, done.deleted
    return {
        "took": done.took,
        "timed_out": done.timed_out,
        "total": matched,
        "updated": 0,
        "created": 0,
        "deleted": deleted,
        "batches": 1 if matched else 0,
        "version_conflicts": 0,
        "noops": 0,
        "retries": {"bulk": 0, "search": 0},
        "throttled_millis": 0,
        "requests_per_second": -1.0,
        "throttled_until_millis": 0,
        "failures": [],
    }


def container_view(source: Mapping[str, Any]) -> dict[str, Any]:
    """A container as ml-commons shows it: ``owner`` is a user object (``User.toXContent``), never the
    bare name it is stored as, in get and in search hits alike (queries then see ``owner.name``).
    ``backend_roles`` are the creator's key's when it made the container, as ml-commons' user object keeps
    them; ``roles`` (security roles) have no counterpart here."""
    view = dict(source)
    creator_roles = view.pop(OWNER_ROLES, None)
    if isinstance(view.get("owner"), str):
        view["owner"] = {
            "name": view["owner"],
            "backend_roles": list(creator_roles or []),
            "roles": [],
            "custom_attribute_names": [],
            "user_requested_tenant": None,
        }
    return view


def session_created_view(created: SessionCreated) -> dict[str, str]:
    return {"session_id": created.session_id, "status": "created" if created.created else "exists"}


def deleted_memory_view(deleted: DeletedMemory) -> dict[str, Any]:
    """ml-commons' delete response, with ``forgotten`` (ours) when the caller asked for the report."""
    response = written_view(deleted.written)
    return response if deleted.forgotten is None else {**response, "forgotten": deleted.forgotten.as_dict()}


def found_memory_view(found: FoundMemory) -> dict[str, Any]:
    """A memory as get shows it, with ``memory_sources`` when they were asked for."""
    view = memory_view(found.memory_type, found.doc.source, found.embedding)
    if found.sources is not None:
        view["memory_sources"] = found.sources
    return view


def memory_view(memory_type: str, source: Mapping[str, Any], embedding: list[float] | None) -> dict[str, Any]:
    """A memory as get shows it: working memory without our bookkeeping, long-term with its embedding."""
    doc = dict(source)
    if memory_type == WORKING:
        for hidden in ("namespace_size", "parameters", "session_id", "tenant_id"):
            doc.pop(hidden, None)
    elif memory_type == LONG_TERM:
        doc.pop("memory_container_id", None)
        if embedding is not None:
            doc["memory_embedding"] = embedding
    return doc


def ranked_view(ranked: RankedMemories) -> dict[str, Any]:
    """A semantic or hybrid search's answer: the scored docs at or above ``min_score``, without their vectors."""
    hits = []
    for doc, score in ranked.scored:
        if ranked.min_score is not None and score < ranked.min_score:
            continue
        source = {key: value for key, value in doc.source.items() if key != "memory_embedding"}
        hits.append(DocumentHit(doc.id, score, source))
    top = max((h.score or 0.0 for h in hits), default=None)
    result = DocumentResults(len(hits), top, tuple(hits), ranked.timed_out)
    return search_response(result, ranked.took, index=ranked.index)


def cosine_score(cosine: float) -> float:
    """OpenSearch's score of a ``cosinesimil`` k-NN hit."""
    return (1.0 + cosine) / 2.0
