"""The OpenSearch agentic store's documents: ml-commons' mappings, and our documents as indexed, with the
owner fields every read and query checks and the fields no answer shows.

The mappings are ml-commons' (``ml_memory_*.json``): ``flat_object`` for
``namespace``, ``tags``, ``metadata`` and the other maps, ``nested`` messages,
``text`` memory and summary, keywords for ids, and in long-term
``memory_embedding`` a ``knn_vector`` (lucene HNSW, cosinesimil, the model's
dimension).  ``dynamic`` is false, so a field of an unexpected shape is kept in
``_source`` and never breaks a write.  Two fields of ours:

- ``tenant_id`` (ml-commons has it for multi-tenancy) holds the organisation;
  with ``owner_id`` (the user, empty for an organisation-wide key) and
  ``memory_container_id`` it is a ``term`` filter wrapped around **every**
  search, k-NN, BM25, scan and delete by query this store sends, and checked on
  every read by id.  It is not shown in answers.
- ``embedding_pending`` marks a long-term memory whose embedding is still to be
  computed (the durable queue of the embedder drain), and ``embedding_lease_until``
  which server process computes it (``opensearch_queues``); not shown either.
- ``memory_sources`` on long-term and history docs: the working memories an infer run wrote them from
  (``sources``), which forgetting looks up; not shown.  An infer job also names its ``working_memory_id``.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from typing import Any, TypeVar

from opensearchpy.exceptions import ConflictError

from memory_plugin.agentic.models import HISTORY, LONG_TERM, SESSIONS, WORKING
from memory_plugin.agentic.stores.base import ExactTerms, StoredDoc, may_use, owner_id, owner_key, owner_of
from memory_plugin.agentic.stores.sources import SOURCES
from memory_plugin.auth import Principal
from memory_plugin.errors import Conflict
from memory_plugin.leases import LEASE_MAPPINGS

T = TypeVar("T")

_KEYWORD = {"type": "keyword"}
_FLAT = {"type": "flat_object"}
_DATE = {"type": "date", "format": "strict_date_time||epoch_millis"}
_STORED_ONLY = {"type": "object", "enabled": False}
_HIDDEN = ("tenant_id", "embedding_pending", "embedding_lease_until", SOURCES)
#: The hidden field's mapping, in long-term and history indices.
SOURCES_MAPPING = {
    "type": "object",
    "properties": {
        "working_memory_id": {"type": "keyword"},
        "session_id": {"type": "keyword"},
        "memory": {"type": "text", "index": False},
    },
}
#: Fields added since the first release: put into the mappings of indices that existed before them.
ADDED_FIELDS = (SOURCES, "working_memory_id")
_COMMON = {
    "owner_id": _KEYWORD,
    "memory_container_id": _KEYWORD,
    "tenant_id": _KEYWORD,
    "namespace": _FLAT,
    "namespace_size": {"type": "integer"},
    "tags": _FLAT,
    "created_time": _DATE,
    "last_updated_time": _DATE,
}
#: ``index.max_terms_count``'s default: a ``terms`` query holds no more.
_MAX_TERMS = 65_536
INDEX_SETTINGS = {"number_of_shards": 1, "number_of_replicas": 0}

CONTAINER_MAPPINGS: dict[str, Any] = {
    "dynamic": False,
    "properties": {
        "name": {"type": "text", "fields": {"keyword": {"type": "keyword", "ignore_above": 256}}},
        "description": {"type": "text"},
        "created_time": _DATE,
        "last_updated_time": _DATE,
        "configuration": {
            "type": "object",
            "properties": {
                "index_prefix": _KEYWORD,
                "embedding_model_type": _KEYWORD,
                "embedding_model_id": _KEYWORD,
                "embedding_dimension": {"type": "integer"},
                "llm_id": _KEYWORD,
                "disable_history": {"type": "boolean"},
                "disable_session": {"type": "boolean"},
                "use_system_index": {"type": "boolean"},
                "max_infer_size": {"type": "integer"},
                "strategies": {
                    "type": "nested",
                    "properties": {
                        "id": _KEYWORD,
                        "enabled": {"type": "boolean"},
                        "type": _KEYWORD,
                        "namespace": _KEYWORD,
                        "configuration": _FLAT,
                    },
                },
                "index_settings": _FLAT,
            },
        },
        "owner": _KEYWORD,
        "owner_id": _KEYWORD,
        "backend_roles": {"type": "text", "fields": {"keyword": _KEYWORD}},
        "tenant_id": _KEYWORD,
    },
}


_HISTORY_SIDE = {
    "type": "object",
    "properties": {"memory": {"type": "text"}, "memory_type": _KEYWORD, "namespace": _FLAT, "tags": _FLAT},
}
#: Each memory type's own fields (``ml_memory_*.json``); long-term's vector is added with the model's dimension.
_TYPE_PROPERTIES: dict[str, dict[str, Any]] = {
    SESSIONS: {
        "summary": {"type": "text"},
        "metadata": _FLAT,
        "agents": _FLAT,
        "additional_info": _FLAT,
        "pinned": {"type": "boolean"},
    },
    WORKING: {
        "payload_type": _KEYWORD,
        "session_id": _KEYWORD,
        "checkpoint_id": _KEYWORD,
        "messages": {"type": "nested", "properties": {"role": _KEYWORD, "content": _FLAT}},
        "message_id": {"type": "integer"},
        "binary_data": {"type": "keyword", "index": False, "doc_values": False},
        "structured_data": _FLAT,
        "structured_data_blob": _STORED_ONLY,
        "metadata": _FLAT,
        "parameters": _FLAT,
        "infer": {"type": "boolean"},
    },
    LONG_TERM: {
        "memory": {"type": "text"},
        "strategy_type": _KEYWORD,
        "strategy_id": _KEYWORD,
        "pinned": {"type": "boolean"},
        "embedding_pending": {"type": "boolean"},
        "embedding_lease_until": {"type": "double"},
        SOURCES: SOURCES_MAPPING,
    },
    HISTORY: {
        "memory_id": _KEYWORD,
        "action": _KEYWORD,
        "before": _HISTORY_SIDE,
        "after": _HISTORY_SIDE,
        "error": {"type": "text"},
        SOURCES: SOURCES_MAPPING,
    },
}


def _nested(properties: Mapping[str, Any], prefix: str = "") -> frozenset[str]:
    paths: set[str] = set()
    for name, field in properties.items():
        if field.get("type") == "nested":
            paths.add(prefix + name)
        paths |= _nested(field.get("properties", {}), f"{prefix}{name}.")
    return frozenset(paths)


#: The paths a ``nested`` query may name, by memory type (and ``"container"``): the mappings' nested objects.
NESTED_PATHS: dict[str, frozenset[str]] = {
    "container": _nested(CONTAINER_MAPPINGS["properties"]),
    **{memory_type: _nested(properties) for memory_type, properties in _TYPE_PROPERTIES.items()},
}


def _exact_path(properties: Mapping[str, Any], path: str) -> bool:
    """Whether the index holds every string at ``path`` exactly as a ``term`` there compares it: a keyword field
    of the mapping (indexed), or a path below a ``flat_object`` map (``dynamic`` is false: nothing else is)."""
    root, _, rest = path.partition(".")
    field = properties.get(root, {})
    if field.get("type") == "keyword":
        return not rest and bool(field.get("index", True))
    return field.get("type") == "flat_object" and bool(rest)


#: Every path some memory type's index holds exactly (``indexed_field``).
def exact_anywhere(path: str) -> bool:
    return any(_exact_path({**_COMMON, **properties}, path) for properties in _TYPE_PROPERTIES.values())


def candidate_filters(memory_type: str, required: ExactTerms) -> list[Any]:
    """Term filters that let the node return only the docs that may hold, for each ``(paths, values)``, one of
    the values at one of the paths (``docs_matching``): a requirement with a path the index does not hold
    exactly is left out (its docs are all candidates)."""
    properties = {**_COMMON, **_TYPE_PROPERTIES[memory_type]}
    filters: list[Any] = []
    for paths, values in required:
        if paths and all(_exact_path(properties, path) for path in paths) and len(values) <= _MAX_TERMS:
            clauses = [{"terms": {path: list(values)}} for path in paths]
            filters.append(clauses[0] if len(clauses) == 1 else {"bool": {"should": clauses}})
    return filters


def memory_mappings(memory_type: str, dimension: int) -> dict[str, Any]:
    """ml-commons' mappings of one memory type (``ml_memory_*.json``), plus our hidden fields."""
    properties: dict[str, Any] = {**_COMMON, **_TYPE_PROPERTIES[memory_type]}
    if memory_type == LONG_TERM:
        properties["memory_embedding"] = {
            "type": "knn_vector",
            "dimension": dimension,
            "method": {
                "name": "hnsw",
                "engine": "lucene",
                "space_type": "cosinesimil",
                "parameters": {"m": 16, "ef_construction": 100},
            },
        }
    return {"dynamic": False, "properties": properties}


JOB_MAPPINGS: dict[str, Any] = {
    "dynamic": False,
    "properties": {
        "memory_container_id": _KEYWORD,
        "tenant_id": _KEYWORD,
        "owner_id": _KEYWORD,
        "created_time": _DATE,
        "attempts": {"type": "integer"},
        "working_memory_id": _KEYWORD,
        "request": _STORED_ONLY,
        #: The LLM's answers of earlier tries, by step (``keep_infer_answers``).
        "llm_answers": _STORED_ONLY,
        **LEASE_MAPPINGS,
    },
}


#: Long-term memories whose embedding is still to be computed.
PENDING = {"term": {"embedding_pending": True}}


def owner_terms(owner: Principal) -> list[dict[str, Any]]:
    organization_id, user = owner_key(owner)
    return [{"term": {"tenant_id": organization_id}}, {"term": {"owner_id": user}}]


def owned(source: Mapping[str, Any], owner: Principal) -> bool:
    return (source.get("tenant_id"), source.get("owner_id")) == owner_key(owner)


def usable(source: Mapping[str, Any], caller: Principal) -> bool:
    """Whether ``caller`` may use the container ``source`` (``base.may_use``)."""
    return may_use(caller, source.get("tenant_id", ""), source.get("owner_id", ""), source.get("backend_roles"))


def usable_terms(caller: Principal) -> list[dict[str, Any]]:
    """``usable`` as query filters, so that a listing selects in the query, never after it."""
    terms: list[dict[str, Any]] = [{"term": {"tenant_id": caller.organization_id}}]
    if not caller.organization_admin:
        mine = {"term": {"owner_id": owner_id(caller)}}
        shared = {"terms": {"backend_roles.keyword": list(caller.backend_roles)}}
        terms.append({"bool": {"should": [mine, shared], "minimum_should_match": 1}})
    return terms


def container_owner(source: Mapping[str, Any]) -> Principal:
    return owner_of(source.get("tenant_id", ""), source.get("owner_id", ""))


def container_doc(hit: Mapping[str, Any]) -> StoredDoc:
    """A container as a read returns it, with its owner."""
    return replace(stored_doc(hit, True), owner=container_owner(hit["_source"]))


def container_terms(owner: Principal, container_id: str) -> list[dict[str, Any]]:
    """Every doc of a container, whoever wrote it (its users' memories, when it is deleted)."""
    return [{"term": {"tenant_id": owner.organization_id}}, {"term": {"memory_container_id": container_id}}]


def with_owner(owner: Principal, doc: Mapping[str, Any]) -> dict[str, Any]:
    """``doc`` as indexed: with the owner fields every read and query checks."""
    organization_id, user = owner_key(owner)
    return {**doc, "tenant_id": organization_id, "owner_id": user}


def visible(source: Mapping[str, Any], container: bool = False) -> dict[str, Any]:
    hidden = (*_HIDDEN, "owner_id", "memory_embedding") if container else (*_HIDDEN, "memory_embedding")
    return {key: value for key, value in source.items() if key not in hidden}


def stored_doc(hit: Mapping[str, Any], container: bool = False) -> StoredDoc:
    return StoredDoc(hit["_id"], visible(hit["_source"], container), hit.get("_version", 1), hit.get("_seq_no", 0))


def if_unchanged(found: Mapping[str, Any]) -> dict[str, Any]:
    """The optimistic-concurrency condition of a write over the version ``found`` was read at."""
    return {"if_seq_no": found["_seq_no"], "if_primary_term": found["_primary_term"]}


#: How often a read-merge-write is tried before the caller hears 409.
WRITE_ATTEMPTS = 20


async def until_unchanged(attempt: Callable[[], Awaitable[T]], what: str) -> T:
    """Run ``attempt`` (read a doc, merge, write ``if_unchanged``) again while another write got in between.

    Many server processes write the same documents, so only the version check, never a lock of this process,
    keeps a concurrent write from being lost.  A jittered pause spreads out writers who collided; after
    ``WRITE_ATTEMPTS`` the caller hears 409 and nothing of its change is written.
    """
    for tried in range(WRITE_ATTEMPTS):
        try:
            return await attempt()
        except ConflictError:
            await asyncio.sleep(random.uniform(0, min(0.5, 0.005 * 2**tried)))
    raise Conflict(f"{what} kept changing while it was updated; try again")


def in_scope(found: Mapping[str, Any], owner: Principal, container_id: str | None) -> bool:
    """The doc is the owner's (and, for a memory, the container's)."""
    source = found["_source"]
    return owned(source, owner) and (container_id is None or source.get("memory_container_id") == container_id)
