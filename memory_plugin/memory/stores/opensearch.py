"""Conversational memory kept in a real OpenSearch cluster, in ML Commons-like indices.

``OpenSearchMemoryStore`` behaves exactly like ``SqliteMemoryStore``; it is
chosen when the home region is served by OpenSearch (``services.py``).

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
used concrete indices under the names themselves; ``open`` finds such an index,
copies its documents converted into ``-v2``, and swaps the old index for the
alias in one atomic ``_aliases`` request.  The copy is idempotent, so two
servers starting at once both finish; a server of the old version still
writing meanwhile could lose those writes, so stop old servers before
starting an upgraded one.  A later schema adds ``-v3`` and one more converter.

Consistency
-----------
Every write passes ``refresh=true`` (ML Commons' ``RefreshPolicy.IMMEDIATE``):
the very next read, a search included, sees it.  ``wait_for`` would be cheaper
for the cluster under heavy write load but makes each write wait for the next
scheduled refresh (up to ``refresh_interval``, 1 s by default).  Reads of one
document use the real-time GET API.

Read-modify-write (``update_conversation``, ``update_interaction`` and the
``updated_time`` bump of ``add_interaction``) rewrites the whole document
under optimistic concurrency control (``if_seq_no``/``if_primary_term``) and
retries on a conflict, so concurrent writers never lose each other's change.
A whole-document rewrite (not a partial ``_update``) is used because partial
updates merge object fields, and ``additional_info`` must be replaced.

Races with ``delete_conversation`` (SQLite has none, having transactions):
the meta document goes first, then the messages are collected by a search
and deleted by id in bulk.  A concurrent ``add_interaction`` either wrote its
message before the messages were collected (and it is deleted with them) or finds the meta document gone when it bumps ``updated_time``; it
then deletes its own message and answers False.  A process killed in the
middle of a delete can leave messages without a conversation behind; they
can still be read by id, but never listed.

Paging beyond ``index.max_result_window`` (10000) uses ``search_after`` over
the same sort, so every offset gives the same answer as SQLite.

``_search`` runs inside OpenSearch: the caller's body is checked and wrapped in
the owner's filter by ``scoped_search.py``, and only the hits of one page come
back, however long the owner's history.

The history bridge's outbox
---------------------------
With the bridge on, ``{index_prefix}-memory-outbox`` holds its entries.  An
added message and its "index" entry go in one bulk request with
``refresh=true``; an update or a conversation delete writes its entry first,
so that a crash can leave an entry without its change (harmless: the bridge
reads the memory as it is when it takes the entry, and a "delete" entry waits
while its conversation still exists), never a change without its entry.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from opensearchpy import AsyncOpenSearch
from opensearchpy.exceptions import ConflictError, NotFoundError, TransportError
from tqdm import tqdm

from memory_plugin.auth import Principal
from memory_plugin.clock import new_id
from memory_plugin.dates import isoformat, parse_instant
from memory_plugin.dsl import MESSAGE_INDEX, META_INDEX
from memory_plugin.errors import RelayedBadRequest, Unavailable
from memory_plugin.memory.documents import memory_source, message_source
from memory_plugin.memory.models import Conversation, Document, Interaction, Updated, merged
from memory_plugin.memory.stores.base import MemoryStore, OutboxEntry, OutboxLag
from memory_plugin.memory.stores.scoped_search import (
    INTERNAL_FIELD,
    ScopedSearch,
    public_error,
    public_response,
    scoped_search,
)
from memory_plugin.opensearch_client import (
    BULK_DOCS,
    MAX_RESULT_WINDOW,
    bulk,
    create_index,
    delete_by_query,
    get_document,
    make_client,
    scan,
)
from memory_plugin.settings import OpenSearchRegion

#: Largest UTF-8 size of one ``additional_info`` key + value that is indexed in the flat_object
#: (Lucene refuses terms over 32766 bytes; flat_object indexes ``key=value`` terms).
_FLAT_ENTRY_LIMIT = 8191
#: Optimistic-concurrency retries before giving up.
_RETRIES = 50

_KEYWORD = {"type": "keyword"}
#: ml-commons' date fields (millisecond precision), as ``ConversationalIndexConstants`` maps them.
_DATE = {"type": "date", "format": "strict_date_time||epoch_millis"}
_NANOS = {"type": "date_nanos"}
_UNINDEXED = {"type": "keyword", "index": False, "doc_values": False}

INDEX_SETTINGS = {"index": {"number_of_shards": 1, "number_of_replicas": 0}}

#: Bumped whenever the mappings change; ``open`` migrates older indices (see the module docstring).
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
        INTERNAL_FIELD: _internal(updated_time=_NANOS),
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


OUTBOX_MAPPINGS: dict[str, Any] = {
    "dynamic": "strict",
    "properties": {
        "entry_id": _KEYWORD,
        "kind": _KEYWORD,
        "organization_id": _KEYWORD,
        "user": _KEYWORD,
        "memory_id": _KEYWORD,
        "message_id": _KEYWORD,
        "enqueued_at": {"type": "double"},
        "attempts": {"type": "integer"},
        "not_before": {"type": "double"},
    },
}
_OUTBOX_ORDER = [{"enqueued_at": {"order": "asc"}}, {"entry_id": {"order": "asc"}}]


def _index_settings(mappings: Mapping[str, Any]) -> dict[str, Any]:
    """One shard, and ``query_string`` without fields searching ml-commons' own fields only, as on the real node."""
    searchable = [
        name
        for name, mapping in mappings["properties"].items()
        if mapping.get("type") in ("text", "keyword", "flat_object")
    ]
    return {"index": {**INDEX_SETTINGS["index"], "query": {"default_field": searchable}}}


_EXACT_CREATED = f"{INTERNAL_FIELD}.create_time"
#: The sort tie-breaker: a keyword copy of ``_id`` (sorting on ``_id`` needs field data).
_OWN_ID = f"{INTERNAL_FIELD}.id"


def _owner_fields(owner: Principal) -> dict[str, str]:
    return {"organization_id": owner.organization_id, "user": owner.user_id or ""}


def _owner_filter(owner: Principal) -> list[dict[str, Any]]:
    return [{"term": {f"{INTERNAL_FIELD}.{name}": value}} for name, value in _owner_fields(owner).items()]


def _owned(source: Mapping[str, Any], owner: Principal) -> bool:
    internal = source.get(INTERNAL_FIELD) or {}
    return internal.get("organization_id") == owner.organization_id and internal.get("user") == (owner.user_id or "")


def _principal(source: Mapping[str, Any]) -> Principal:
    return _principal_of(source[INTERNAL_FIELD])


def _principal_of(fields: Mapping[str, Any]) -> Principal:
    """The inverse of ``_owner_fields``."""
    return Principal(fields["organization_id"], fields.get("user") or None)


def _flat(value: Any) -> dict[str, str] | None:
    """The flat_object copy of ``additional_info``: only a map, only when every entry can be indexed."""
    if not isinstance(value, Mapping):
        return None
    for key, item in value.items():
        if not isinstance(key, str) or not isinstance(item, str):
            return None
        if len(key.encode()) + len(item.encode()) > _FLAT_ENTRY_LIMIT:
            return None
    return dict(value)


def _set_additional_info(source: dict[str, Any], value: Any) -> None:
    flat = _flat(value)
    if flat is None:
        source.pop("additional_info", None)
    else:
        source["additional_info"] = flat
    source[INTERNAL_FIELD]["additional_info_json"] = None if value is None else json.dumps(value)


def _additional_info(source: Mapping[str, Any]) -> Any:
    encoded = source[INTERNAL_FIELD].get("additional_info_json")
    return None if encoded is None else json.loads(encoded)


def _set_time(source: dict[str, Any], name: str, value: str) -> None:
    """A time in ml-commons' field and, for exact ordering, in its nanosecond copy."""
    source[name] = value
    source[INTERNAL_FIELD][name] = value


def _merge_into(source: dict[str, Any], changes: Mapping[str, Any]) -> bool:
    """Apply a partial update to ``source`` as OpenSearch would; False when nothing changes."""
    before = json.dumps(source, sort_keys=True)
    for name, value in changes.items():
        if name == "additional_info":
            _set_additional_info(source, merged(_additional_info(source), value))
        elif name == "updated_time":
            _set_time(source, name, isoformat(value))
        else:
            source[name] = merged(source.get(name), value)
    return json.dumps(source, sort_keys=True) != before


def _conversation_source(conversation: Conversation) -> dict[str, Any]:
    """ml-commons' meta document (``user`` only for a principal with one), plus ``memory_plugin``."""
    created, updated = isoformat(conversation.create_time), isoformat(conversation.updated_time)
    source: dict[str, Any] = {"create_time": created, "updated_time": updated}
    optional = {
        "name": conversation.name,
        "user": conversation.owner.user_id,
        "application_type": conversation.application_type,
    }
    source.update((name, value) for name, value in optional.items() if value is not None)
    source[INTERNAL_FIELD] = {
        **_owner_fields(conversation.owner),
        "id": conversation.conversation_id,
        "create_time": created,
        "updated_time": updated,
    }
    _set_additional_info(source, conversation.additional_info)
    return source


def _conversation(conversation_id: str, source: Mapping[str, Any], version: int = 1) -> Conversation:
    return Conversation(
        conversation_id=conversation_id,
        owner=_principal(source),
        name=source.get("name"),
        create_time=parse_instant(source["create_time"]),
        updated_time=parse_instant(source["updated_time"]),
        additional_info=_additional_info(source),
        application_type=source.get("application_type"),
        version=version,
    )


def _interaction_source(interaction: Interaction) -> dict[str, Any]:
    """ml-commons' message document, plus ``memory_plugin``."""
    created = isoformat(interaction.create_time)
    source: dict[str, Any] = {
        "memory_id": interaction.conversation_id,
        "create_time": created,
        "input": interaction.input,
        "prompt_template": interaction.prompt_template,
        "response": interaction.response,
        "origin": interaction.origin,
        "parent_message_id": interaction.parent_interaction_id,
        "trace_number": interaction.trace_number,
        INTERNAL_FIELD: {**_owner_fields(interaction.owner), "id": interaction.interaction_id, "create_time": created},
    }
    _set_additional_info(source, interaction.additional_info)
    return source


def _interaction(interaction_id: str, source: Mapping[str, Any], version: int = 1) -> Interaction:
    return Interaction(
        interaction_id=interaction_id,
        conversation_id=source["memory_id"],
        owner=_principal(source),
        create_time=parse_instant(source["create_time"]),
        input=source.get("input"),
        response=source.get("response"),
        prompt_template=source.get("prompt_template"),
        origin=source.get("origin"),
        additional_info=_additional_info(source),
        parent_interaction_id=source.get("parent_message_id"),
        trace_number=source.get("trace_number"),
        version=version,
    )


def _upgrade_v1(source: Mapping[str, Any], doc_id: str, build: Any, read: Any) -> dict[str, Any]:
    """A schema 1 document (owner, id copy and JSON at the top level) as schema 2."""
    internal = {
        "organization_id": source["organization_id"],
        "user": source.get("user") or "",
        "additional_info_json": source.get("additional_info_json"),
    }
    public = {k: v for k, v in source.items() if k not in ("organization_id", "additional_info_json")}
    result: dict[str, Any] = build(read(doc_id, {**public, INTERNAL_FIELD: internal}))
    return result


class OpenSearchMemoryStore(MemoryStore):
    def __init__(self, settings: OpenSearchRegion, *, outbox: bool = False) -> None:
        self.settings = settings
        self.outbox = outbox
        prefix = settings.index_prefix.lower()  # index names are lowercase, as in the region store
        #: The names every read and write uses: aliases of the current schema's versioned indices.
        self.meta_index = f"{prefix}-memory-meta"
        self.message_index = f"{prefix}-memory-message"
        self.outbox_index = f"{prefix}-memory-outbox"
        #: ``index.max_result_window``; deeper pages go through ``search_after``.
        self.max_result_window = MAX_RESULT_WINDOW
        self._client: AsyncOpenSearch | None = None

    @property
    def client(self) -> AsyncOpenSearch:
        if self._client is None:
            raise RuntimeError("OpenSearchMemoryStore is not open")
        return self._client

    # -- lifecycle ------------------------------------------------------------------

    async def open(self) -> None:
        self._client = make_client(self.settings)
        try:
            await self._ensure_index(self.meta_index, META_MAPPINGS, _conversation_source, _conversation)
            await self._ensure_index(self.message_index, MESSAGE_MAPPINGS, _interaction_source, _interaction)
            if self.outbox:  # only the bridge reads it
                outbox = {"settings": INDEX_SETTINGS, "mappings": OUTBOX_MAPPINGS}
                await create_index(self.client, self.outbox_index, outbox)
        except BaseException:
            await self.close()
            raise

    async def _ensure_index(self, alias: str, mappings: Mapping[str, Any], build: Any, read: Any) -> None:
        """``alias`` names the current schema's index, created or migrated from a schema 1 index of that name."""
        current = f"{alias}-v{SCHEMA_VERSION}"
        body = {"settings": _index_settings(mappings), "mappings": mappings}
        if await self.client.indices.exists_alias(name=alias):
            return  # the alias moves only with a migration, which points it at the current index
        if not await self.client.indices.exists(index=alias):
            await create_index(self.client, current, {**body, "aliases": {alias: {}}})
            return
        # Schema 1: a concrete index under the name itself.  Copy every document, converted, then
        # swap the old index for the alias in one atomic step.  Idempotent, so two processes starting
        # at once both copy and the second swap finds the old index gone.
        await create_index(self.client, current, body)
        documents = [hit async for hit in scan(self.client, alias, {"match_all": {}}, True)]
        for start in tqdm(range(0, len(documents), BULK_DOCS), desc=f"migrating {alias}", disable=not documents):
            actions: list[dict[str, Any]] = []
            for hit in documents[start : start + BULK_DOCS]:
                actions.append({"index": {"_index": current, "_id": hit["_id"]}})
                actions.append(_upgrade_v1(hit["_source"], hit["_id"], build, read))
            await bulk(self.client, actions, refresh=True)
        try:
            await self.client.indices.update_aliases(
                body={"actions": [{"add": {"index": current, "alias": alias}}, {"remove_index": {"index": alias}}]}
            )
        except NotFoundError:
            if not await self.client.indices.exists_alias(name=alias):
                raise

    async def close(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            await client.close()

    async def health(self) -> dict[str, Any]:
        health = await self.client.cluster.health(index=[self.meta_index, self.message_index])
        count = await self.client.count(index=self.meta_index)
        return {"status": health["status"], "conversations": count["count"]}

    # -- low-level helpers -------------------------------------------------------------

    def _entry_action(
        self, kind: Literal["index", "delete"], owner: Principal, conversation_id: str, interaction_id: str | None
    ) -> list[dict[str, Any]]:
        """The bulk lines that create one outbox entry."""
        entry_id = new_id()
        source = {
            "entry_id": entry_id,
            "kind": kind,
            **_owner_fields(owner),
            "memory_id": conversation_id,
            "message_id": interaction_id,
            "enqueued_at": time.time(),
            "attempts": 0,
            "not_before": 0.0,
        }
        return [{"create": {"_index": self.outbox_index, "_id": entry_id}}, source]

    async def _enqueue(
        self,
        kind: Literal["index", "delete"],
        owner: Principal,
        conversation_id: str,
        interaction_id: str | None = None,
    ) -> None:
        if self.outbox:
            await bulk(self.client, self._entry_action(kind, owner, conversation_id, interaction_id), refresh=True)

    async def _get_owned(self, index: str, doc_id: str, owner: Principal) -> dict[str, Any] | None:
        document = await get_document(self.client, index, doc_id)
        if document is None or not _owned(document["_source"], owner):
            return None
        return document

    async def _search(
        self,
        index: str,
        query: Mapping[str, Any],
        sort: list[Any],
        offset: int = 0,
        limit: int | None = None,
    ) -> list[dict[str, Any]]:
        """Hits ``offset`` to ``offset + limit`` (all of them when ``limit`` is None) in ``sort`` order.

        ``sort`` must be total (end with a unique key).  Pages within the result window
        are one ``from``/``size`` search; anything deeper walks with ``search_after``.
        """
        window = self.max_result_window
        if limit is not None and offset + limit <= window:
            if limit <= 0:
                return []
            window_body = {
                "query": query,
                "sort": sort,
                "from": offset,
                "size": limit,
                "track_total_hits": False,
                "version": True,
            }
            result = await self.client.search(index=index, body=window_body)
            return list(result["hits"]["hits"])
        end = None if limit is None else offset + limit
        hits: list[dict[str, Any]] = []
        position = 0
        after: list[Any] | None = None
        while end is None or position < end:
            size = window if end is None else min(window, end - position)
            body: dict[str, Any] = {
                "query": query,
                "sort": sort,
                "size": size,
                "track_total_hits": False,
                "version": True,
            }
            if position + size <= offset:
                body["_source"] = False  # only walking past these
            if after is not None:
                body["search_after"] = after
            page = (await self.client.search(index=index, body=body))["hits"]["hits"]
            for hit in page:
                if position >= offset:
                    hits.append(hit)
                position += 1
            if len(page) < size:
                break
            after = page[-1]["sort"]
        return hits

    async def _rewrite(
        self,
        index: str,
        doc_id: str,
        owner: Principal,
        change: Any,
    ) -> tuple[dict[str, Any], int, bool] | None:
        """Read, ``change(source)`` in place, write back under optimistic concurrency; retry on conflict.

        Returns the new source, its ``_version`` and whether it was written, or None if the
        document is absent or not the owner's.  ``change`` returning False means nothing to write.
        """
        for _ in range(_RETRIES):
            document = await self._get_owned(index, doc_id, owner)
            if document is None:
                return None
            source = dict(document["_source"])
            if change(source) is False:
                return source, document["_version"], False
            try:
                written = await self.client.index(
                    index=index,
                    id=doc_id,
                    body=source,
                    if_seq_no=document["_seq_no"],
                    if_primary_term=document["_primary_term"],
                    refresh="true",
                )
            except ConflictError:
                await asyncio.sleep(0)
                continue
            except NotFoundError:
                return None
            return source, written["_version"], True
        raise RuntimeError(f"gave up updating [{doc_id}] in [{index}] after {_RETRIES} conflicts")

    async def _update(
        self,
        index: str,
        doc_id: str,
        owner: Principal,
        changes: Mapping[str, Any],
        read: Callable[[str, Mapping[str, Any], int], Document],
    ) -> Updated[Document] | None:
        """``changes`` merged in as a partial document update merges them; ``noop`` when nothing changed."""
        rewritten = await self._rewrite(index, doc_id, owner, lambda source: _merge_into(source, changes))
        if rewritten is None:
            return None
        source, version, written = rewritten
        return Updated(read(doc_id, source, version), "updated" if written else "noop")

    # -- conversations ---------------------------------------------------------------------

    async def add_conversation(self, conversation: Conversation) -> None:
        await self.client.index(
            index=self.meta_index,
            id=conversation.conversation_id,
            body=_conversation_source(conversation),
            op_type="create",
            refresh="true",
        )

    async def get_conversation(self, owner: Principal, conversation_id: str) -> Conversation | None:
        document = await self._get_owned(self.meta_index, conversation_id, owner)
        return None if document is None else _conversation(conversation_id, document["_source"], document["_version"])

    async def list_conversations(
        self, owner: Principal, offset: int, limit: int, by: str = "create_time"
    ) -> list[Conversation]:
        field = {"create_time": _EXACT_CREATED, "updated_time": f"{INTERNAL_FIELD}.updated_time"}[by]
        hits = await self._search(
            self.meta_index,
            {"bool": {"filter": _owner_filter(owner)}},
            [{field: {"order": "desc"}}, {_OWN_ID: {"order": "desc"}}],
            offset,
            limit,
        )
        return [_conversation(hit["_id"], hit["_source"], hit["_version"]) for hit in hits]

    async def update_conversation(
        self, owner: Principal, conversation_id: str, changes: Mapping[str, Any]
    ) -> Updated[Conversation] | None:
        return await self._update(self.meta_index, conversation_id, owner, changes, _conversation)

    async def delete_conversation(self, owner: Principal, conversation_id: str) -> list[str] | None:
        document = await self._get_owned(self.meta_index, conversation_id, owner)
        if document is None:
            return None
        await self._enqueue("delete", owner, conversation_id)  # first: a crash may not leave records behind
        try:
            await self.client.delete(
                index=self.meta_index,
                id=conversation_id,
                if_seq_no=document["_seq_no"],
                if_primary_term=document["_primary_term"],
                refresh="true",
            )
        except NotFoundError:
            return None  # deleted meanwhile by someone else
        except ConflictError:
            # Changed meanwhile (renamed, or a message bumped it): still ours, delete it anyway.
            try:
                await self.client.delete(index=self.meta_index, id=conversation_id, refresh="true")
            except NotFoundError:
                return None
        query = {"bool": {"filter": [{"term": {"memory_id": conversation_id}}]}}
        hits = await delete_by_query(self.client, self.message_index, query)
        return sorted(hit["_id"] for hit in hits)

    async def erase_user(self, owner: Principal) -> tuple[int, int]:
        query = {"bool": {"filter": _owner_filter(owner)}}
        # Messages first: a crash between the two leaves memories to erase again, never orphan messages.
        messages = await delete_by_query(self.client, self.message_index, query)
        memories = await delete_by_query(self.client, self.meta_index, query)
        return len(memories), len(messages)

    # -- interactions --------------------------------------------------------------------------

    async def add_interaction(self, interaction: Interaction) -> bool:
        owner = interaction.owner
        if await self._get_owned(self.meta_index, interaction.conversation_id, owner) is None:
            return False
        actions: list[dict[str, Any]] = [
            {"create": {"_index": self.message_index, "_id": interaction.interaction_id}},
            _interaction_source(interaction),
        ]
        if self.outbox:
            actions += self._entry_action("index", owner, interaction.conversation_id, interaction.interaction_id)
        try:
            await bulk(self.client, actions, refresh=True)
        except Exception:
            if self.outbox:  # the message without its entry would never be indexed: take it back
                await self._delete_quietly(self.message_index, interaction.interaction_id)
            raise
        created = isoformat(interaction.create_time)

        def bump(source: dict[str, Any]) -> bool:
            # Same-format ISO strings order as the instants do (SQLite's max() on text).  The write
            # happens even when the time stays, as ml-commons' own update does (its _version counts it).
            _set_time(source, "updated_time", max(source[INTERNAL_FIELD]["updated_time"], created))
            return True

        if await self._rewrite(self.meta_index, interaction.conversation_id, owner, bump) is None:
            # The conversation was deleted while we wrote: take the message back.
            await self._delete_quietly(self.message_index, interaction.interaction_id)
            return False
        return True

    async def _delete_quietly(self, index: str, doc_id: str) -> None:
        try:
            await self.client.delete(index=index, id=doc_id, refresh="true")
        except NotFoundError:
            pass

    async def get_interaction(self, owner: Principal, interaction_id: str) -> Interaction | None:
        document = await self._get_owned(self.message_index, interaction_id, owner)
        return None if document is None else _interaction(interaction_id, document["_source"], document["_version"])

    async def list_interactions(
        self, owner: Principal, conversation_id: str, offset: int, limit: int, newest_first: bool
    ) -> list[Interaction] | None:
        if await self._get_owned(self.meta_index, conversation_id, owner) is None:
            return None
        direction = "desc" if newest_first else "asc"
        query = {
            "bool": {
                "filter": [{"term": {"memory_id": conversation_id}}],
                "must_not": [{"exists": {"field": "trace_number"}}],
            }
        }
        sort = [{_EXACT_CREATED: {"order": direction}}, {_OWN_ID: {"order": direction}}]
        hits = await self._search(self.message_index, query, sort, offset, limit)
        return [_interaction(hit["_id"], hit["_source"], hit["_version"]) for hit in hits]

    async def list_traces(
        self, owner: Principal, interaction_id: str, offset: int, limit: int
    ) -> list[Interaction] | None:
        if await self._get_owned(self.message_index, interaction_id, owner) is None:
            return None
        # A trace names its parent freely: only the owner's own traces are listed.
        query = {"bool": {"filter": [{"term": {"parent_message_id": interaction_id}}, *_owner_filter(owner)]}}
        # SQLite sorts NULL first in ascending order.
        sort = [
            {"trace_number": {"order": "asc", "missing": "_first"}},
            {_EXACT_CREATED: {"order": "asc"}},
            {_OWN_ID: {"order": "asc"}},
        ]
        hits = await self._search(self.message_index, query, sort, offset, limit)
        return [_interaction(hit["_id"], hit["_source"], hit["_version"]) for hit in hits]

    async def update_interaction(
        self, owner: Principal, interaction_id: str, changes: Mapping[str, Any]
    ) -> Updated[Interaction] | None:
        if self.outbox and "response" in changes:  # first, so that a crash cannot leave the new text unindexed
            current = await self._get_owned(self.message_index, interaction_id, owner)
            if current is None:
                return None
            await self._enqueue("index", owner, current["_source"]["memory_id"], interaction_id)
        return await self._update(self.message_index, interaction_id, owner, changes, _interaction)

    # -- the history bridge's outbox ----------------------------------------------------------------

    async def outbox_pending(self, limit: int, now: float) -> list[OutboxEntry]:
        # Each organisation's oldest ``limit`` (one collapsed group each), taken in turns as the
        # SQLite store does, so that one organisation's burst does not hold another's behind it.
        body = {
            "query": {"range": {"not_before": {"lte": now}}},
            "sort": _OUTBOX_ORDER,
            "size": limit,
            "collapse": {
                "field": "organization_id",
                "inner_hits": {"name": "oldest", "size": limit, "sort": _OUTBOX_ORDER},
            },
        }
        groups = (await self.client.search(index=self.outbox_index, body=body))["hits"]["hits"]
        queues = [group["inner_hits"]["oldest"]["hits"]["hits"] for group in groups]
        turns = (queue[turn] for turn in range(limit) for queue in queues if turn < len(queue))
        hits = list(itertools.islice(turns, limit))
        sources = [hit["_source"] for hit in hits]
        message_ids = sorted({s["message_id"] for s in sources if s["kind"] == "index" and s.get("message_id")})
        memory_ids = sorted({s["memory_id"] for s in sources})
        messages = await self._mget(self.message_index, message_ids)
        memories = await self._mget(self.meta_index, memory_ids)
        entries = []
        for hit, source in zip(hits, sources):
            owner = _principal_of(source)  # an entry's owner fields are top level
            alive = source["memory_id"] in memories and _owned(memories[source["memory_id"]], owner)
            message = messages.get(source.get("message_id") or "")
            entries.append(
                OutboxEntry(
                    entry_id=hit["_id"],
                    kind=source["kind"],
                    owner=owner,
                    conversation_id=source["memory_id"],
                    enqueued_at=source["enqueued_at"],
                    attempts=source["attempts"],
                    # Without transactions, a message may outlive its conversation for a moment: not indexed then.
                    interaction=_interaction(source["message_id"], message) if message and alive else None,
                    conversation_exists=alive,
                )
            )
        return entries

    async def _mget(self, index: str, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        if not ids:
            return {}
        documents = (await self.client.mget(index=index, body={"ids": list(ids)}))["docs"]
        return {doc["_id"]: doc["_source"] for doc in documents if doc.get("found")}

    async def outbox_done(self, entries: Sequence[OutboxEntry]) -> None:
        actions = [{"delete": {"_index": self.outbox_index, "_id": entry.entry_id}} for entry in entries]
        if actions:
            await bulk(self.client, actions, refresh=True)

    async def outbox_retry(self, entries: Sequence[OutboxEntry], not_before: float) -> None:
        actions: list[dict[str, Any]] = []
        for entry in entries:
            actions.append({"update": {"_index": self.outbox_index, "_id": entry.entry_id}})
            actions.append({"doc": {"attempts": entry.attempts + 1, "not_before": not_before}})
        if actions:
            await bulk(self.client, actions, refresh=True)

    async def outbox_lag(self) -> OutboxLag:
        body = {"query": {"match_all": {}}, "sort": _OUTBOX_ORDER, "size": 1, "track_total_hits": True}
        hits = (await self.client.search(index=self.outbox_index, body=body))["hits"]
        oldest = hits["hits"][0]["_source"]["enqueued_at"] if hits["hits"] else None
        return OutboxLag(hits["total"]["value"], oldest)

    # -- _search, run by OpenSearch itself ----------------------------------------------------------

    async def search_conversations(self, owner: Principal, body: Mapping[str, Any] | None) -> dict[str, Any]:
        search = scoped_search(body, scope=_owner_filter(owner))
        return await self._run_scoped(
            self.meta_index, META_INDEX, search, lambda doc_id, source: memory_source(_conversation(doc_id, source))
        )

    async def search_interactions(
        self, owner: Principal, conversation_id: str, body: Mapping[str, Any] | None
    ) -> dict[str, Any]:
        # ml-commons adds the memory as a scoring ``must`` clause; the owner is a filter.
        memory = {"term": {"memory_id": conversation_id}}
        search = scoped_search(body, must=[memory], scope=_owner_filter(owner))
        return await self._run_scoped(
            self.message_index,
            MESSAGE_INDEX,
            search,
            lambda doc_id, source: message_source(_interaction(doc_id, source)),
        )

    async def _run_scoped(
        self,
        alias: str,
        public_index: str,
        search: ScopedSearch,
        document: Callable[[str, Mapping[str, Any]], dict[str, Any]],
    ) -> dict[str, Any]:
        """Run a checked, scoped search; OpenSearch's 400s are relayed, its other failures are a 503."""
        names = {f"{alias}-v{SCHEMA_VERSION}": public_index, alias: public_index}
        try:
            response = await self.client.search(index=alias, body=search.body)
        except TransportError as error:
            if error.status_code == 400:
                raise RelayedBadRequest(public_error(error.info, names)) from None
            raise Unavailable(f"the memory store did not answer the search: {error.error}") from None
        return public_response(response, search, document=document, names=names)
