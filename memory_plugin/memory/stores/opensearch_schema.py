"""The OpenSearch memory store's indices: their mappings and settings, and the migration of an older schema.

Apart from the store (``opensearch.py``) because they change together, with :data:`SCHEMA_VERSION`,
and only when a field's mapping does; the documents that fill them are ``opensearch_documents.py``.

Indices
-------
Two indices per deployment, named from the region's ``index_prefix`` so that
several deployments (and tests) can share one cluster:

========================================  ===================================
this store (an alias of ``…-v2``)         ML Commons
========================================  ===================================
``{index_prefix}-memory-meta``            ``.plugins-ml-memory-meta``
``{index_prefix}-memory-message``         ``.plugins-ml-memory-message``
========================================  ===================================

ML Commons' fields are mapped exactly as ml-commons 2.19.1 maps them
(``common/src/main/resources/index-mappings/ml_memory_{meta,message}.json``:
``name`` is ``text`` with no keyword subfield, times are ``date`` in
``strict_date_time||epoch_millis``, ``additional_info`` a ``flat_object``), so
a ``_search`` behaves as on the real node.  One difference: ``origin`` ignores
values over 8191 characters, which ml-commons would fail to index at all.

The store's own data lives under one object, ``memory_plugin``, which no
``_search`` may name (``scoped_search.py``):

- ``organization_id`` and ``user``: ML Commons has no tenants; every read here
  is scoped by both.  A principal without a user is ``user: ""`` there (and
  has no top-level ``user``, like a memory on a cluster without security).
- ``id``: a keyword copy of the document's own ``_id``, the sort tie-breaker
  (sorting on ``_id`` needs field data, which OpenSearch discourages).
- ``create_time`` (and ``updated_time`` on memories) as ``date_nanos``: the
  ISO strings with microseconds sort at full precision there, so "newest
  first" agrees with SQLite's text ordering even for writes in the same
  millisecond, where ml-commons' ``date`` fields tie.
- ``message_edits`` (memories): how many times a message of the memory was
  updated.  Each update writes the memory too, so that its version moves
  (``messages_version`` in ``opensearch.py``); the count is taken off the
  ``_version`` shown, which then counts what ml-commons' does.
- ``additional_info_json``: the JSON encoding of ``additional_info``, neither
  indexed nor in doc values, read back as the truth.  2.11 clients send
  ``additional_info`` as a string and 2.12+ clients as a string map; both
  round-trip exactly through it.  The top-level ``additional_info`` is written
  only for a map whose entries are small enough to index.

Schema versions and migration
-----------------------------
The mappings carry ``_meta.schema_version`` (:data:`SCHEMA_VERSION`).  The
names above are aliases of ``{name}-v2``.  Schema 1 (before the ml-commons
mappings: ``name.keyword``, ``date_nanos`` times, our fields at the top level)
used concrete indices under the names themselves; :func:`ensure_index` (run
by the store's ``open``) finds such an index, copies its documents converted
into ``-v2``, and swaps the old index for the alias in one atomic ``_aliases``
request.  The copy is idempotent, so two
servers starting at once both finish; a server of the old version still
writing meanwhile could lose those writes, so stop old servers before
starting an upgraded one.  A later schema adds ``-v3`` and one more converter.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from opensearchpy import AsyncOpenSearch
from opensearchpy.exceptions import NotFoundError
from tqdm import tqdm

from memory_plugin.memory.stores.scoped_search import INTERNAL_FIELD
from memory_plugin.opensearch_client import BULK_DOCS, bulk, create_index, scan

_KEYWORD = {"type": "keyword"}
#: ml-commons' date fields (millisecond precision), as ``ConversationalIndexConstants`` maps them.
_DATE = {"type": "date", "format": "strict_date_time||epoch_millis"}
_NANOS = {"type": "date_nanos"}
_UNINDEXED = {"type": "keyword", "index": False, "doc_values": False}

#: Merge on flush off: every acknowledged write refreshes, and with it on, each refresh also waits while the
#: shard merges the small segments it just made (measured: refresh time per message down a fifth, creates up
#: about as much); background merges keep the segment count down as well.
WRITE_PATH_SETTINGS = {"merge_on_flush": {"enabled": False}}
INDEX_SETTINGS = {"index": {"number_of_shards": 1, "number_of_replicas": 0, **WRITE_PATH_SETTINGS}}

#: Bumped whenever the mappings change; ``ensure_index`` migrates older indices (see the module docstring).
SCHEMA_VERSION = 2


def _internal(**properties: Any) -> dict[str, Any]:
    """The ``memory_plugin`` object: owner, own id, exact times and the exact ``additional_info``."""
    return {
        "properties": {
            "organization_id": _KEYWORD,
            "user": _KEYWORD,
            "id": _KEYWORD,
            "create_time": _NANOS,
            "additional_info_json": _UNINDEXED,
            **properties,
        }
    }


META_MAPPINGS: dict[str, Any] = {
    "dynamic": "strict",
    "_meta": {"schema_version": SCHEMA_VERSION},
    "properties": {
        "name": {"type": "text"},
        "create_time": _DATE,
        "updated_time": _DATE,
        "user": _KEYWORD,
        "application_type": _KEYWORD,
        "additional_info": {"type": "flat_object"},
        INTERNAL_FIELD: _internal(updated_time=_NANOS, message_edits={"type": "long", "index": False}),
    },
}

MESSAGE_MAPPINGS: dict[str, Any] = {
    "dynamic": "strict",
    "_meta": {"schema_version": SCHEMA_VERSION},
    "properties": {
        "memory_id": _KEYWORD,
        "create_time": _DATE,
        "input": {"type": "text"},
        "prompt_template": {"type": "text"},
        "response": {"type": "text"},
        # ml-commons has no ignore_above: a longer origin would make its write fail on Lucene's term limit.
        "origin": {"type": "keyword", "ignore_above": 8191},
        "additional_info": {"type": "flat_object"},
        "parent_message_id": _KEYWORD,
        "trace_number": {"type": "long"},
        INTERNAL_FIELD: _internal(),
    },
}


def index_settings(mappings: Mapping[str, Any]) -> dict[str, Any]:
    """One shard, and ``query_string`` without fields searching ml-commons' own fields only, as on the real node."""
    searchable = [
        name
        for name, mapping in mappings["properties"].items()
        if mapping.get("type") in ("text", "keyword", "flat_object")
    ]
    return {"index": {**INDEX_SETTINGS["index"], "query": {"default_field": searchable}}}


def upgrade_v1(source: Mapping[str, Any], doc_id: str, build: Any, read: Any) -> dict[str, Any]:
    """A schema 1 document (owner, id copy and JSON at the top level) as schema 2."""
    internal = {
        "organization_id": source["organization_id"],
        "user": source.get("user") or "",
        "additional_info_json": source.get("additional_info_json"),
    }
    public = {k: v for k, v in source.items() if k not in ("organization_id", "additional_info_json")}
    result: dict[str, Any] = build(read(doc_id, {**public, INTERNAL_FIELD: internal}))
    return result


async def ensure_index(client: AsyncOpenSearch, alias: str, mappings: Mapping[str, Any], build: Any, read: Any) -> None:
    """``alias`` names the current schema's index, created or migrated from a schema 1 index of that name."""
    current = f"{alias}-v{SCHEMA_VERSION}"
    body = {"settings": index_settings(mappings), "mappings": mappings}
    if await client.indices.exists_alias(name=alias):
        # The alias moves only with a migration, which points it at the current index; fields added
        # within a schema (a new field is unknown to older documents) are added in place.
        await client.indices.put_mapping(index=alias, body={"properties": mappings["properties"]})
        await client.indices.put_settings(index=alias, body={"index": WRITE_PATH_SETTINGS})  # an index made before
        return
    if not await client.indices.exists(index=alias):
        await create_index(client, current, {**body, "aliases": {alias: {}}})
        return
    # Schema 1: a concrete index under the name itself.  Copy every document, converted, then
    # swap the old index for the alias in one atomic step.  Idempotent, so two processes starting
    # at once both copy and the second swap finds the old index gone.
    await create_index(client, current, body)
    documents = [hit async for hit in scan(client, alias, {"match_all": {}}, True)]
    for start in tqdm(range(0, len(documents), BULK_DOCS), desc=f"migrating {alias}", disable=not documents):
        actions: list[dict[str, Any]] = []
        for hit in documents[start : start + BULK_DOCS]:
            actions.append({"index": {"_index": current, "_id": hit["_id"]}})
            actions.append(upgrade_v1(hit["_source"], hit["_id"], build, read))
        await bulk(client, actions, refresh=True)
    try:
        await client.indices.update_aliases(
            body={"actions": [{"add": {"index": current, "alias": alias}}, {"remove_index": {"index": alias}}]}
        )
    except NotFoundError:
        if not await client.indices.exists_alias(name=alias):
            raise
