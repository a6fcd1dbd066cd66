"""Agentic memory in a real OpenSearch cluster, in ml-commons' index layout, mappings and queries.

Chosen when the home region is an OpenSearch cluster (``open_agentic_store``); it answers
exactly like ``SqliteAgenticStore``.

Layout, as ml-commons creates it, under the region's ``index_prefix`` (``R``)
so that deployments and tests can share a cluster:

==========================================  ============================================
this store                                  ml-commons
==========================================  ============================================
``R-ml-am-memory-container``                ``.plugins-ml-am-memory-container``
``R-ml-am-P-memory-{type}``                 ``.plugins-ml-am-P-memory-{type}`` (``P`` the
                                            container's ``index_prefix``; containers of one
                                            prefix share the indices)
``R-ml-am-infer-jobs``                      (a thread pool; here a durable queue)
==========================================  ============================================
The mappings and the fields of ours are in ``opensearch_documents``.

Writes use ``refresh=true``.  An infer run is applied as **one** bulk request (``opensearch_long_term``).

Every update merges into a document read with its ``if_seq_no``/``if_primary_term``
and is written on that condition, read and merged again when another write came
in between (``until_unchanged``): many processes write the same documents, so
no lock of this one could make that safe.

Every server process in front of the cluster drains the queues
(``opensearch_queues``): an infer run is applied only by the holder of its
job's lease, and its ADDs and history entries are create-only under ids
derived from the job, so a run applied twice finds its documents there.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
from opensearchpy import AsyncOpenSearch
from opensearchpy.exceptions import ConflictError, NotFoundError
from opensearchpy.helpers import async_scan

from memory_plugin.agentic.models import LONG_TERM, MEMORY_TYPES, SESSIONS, WORKING, store_prefix
from memory_plugin.agentic.stores.backend import AgenticStore
from memory_plugin.agentic.stores.base import (
    ExactTerms,
    InferJob,
    LongTermChange,
    LongTermScope,
    MemoryAdd,
    Merge,
    PendingEmbedding,
    SessionWrite,
    StoredDoc,
    text_changed,
)
from memory_plugin.agentic.stores.opensearch_documents import (
    CONTAINER_MAPPINGS,
    INDEX_SETTINGS,
    JOB_MAPPINGS,
    candidate_filters,
    container_doc,
    container_owner,
    container_terms,
    exact_anywhere,
    if_unchanged,
    in_scope,
    memory_mappings,
    owner_terms,
    stored_doc,
    until_unchanged,
    usable,
    usable_terms,
    visible,
    with_owner,
)
from memory_plugin.agentic.stores.opensearch_forgetting import forget, map_added_fields
from memory_plugin.agentic.stores.opensearch_long_term import apply_infer, ranked
from memory_plugin.agentic.stores.opensearch_queues import OpenSearchQueues
from memory_plugin.agentic.stores.retention import RetentionStore
from memory_plugin.agentic.stores.retention_opensearch import OpenSearchRetention
from memory_plugin.agentic.stores.sources import SOURCES, Forgotten, sources_of
from memory_plugin.auth import Principal
from memory_plugin.concurrency import run_all
from memory_plugin.opensearch_client import bulk, create_index, delete_by_query, get_document, make_client
from memory_plugin.settings import OpenSearchRegion

log = logging.getLogger("memory_plugin.agentic")


class OpenSearchAgenticStore(AgenticStore):
    shared = True

    def __init__(self, settings: OpenSearchRegion, lease_seconds: float) -> None:
        """``lease_seconds``: how long a claim holds a queue entry (``opensearch_queues.lease_seconds``)."""
        self.settings = settings
        self.root = f"{settings.index_prefix.lower()}-ml-am"
        self.container_index = f"{self.root}-memory-container"
        self.job_index = f"{self.root}-infer-jobs"
        #: Every container's long-term index, the built-in model's dimension's and the others'.
        self.long_term_indices = f"{self.root}-*-memory-{LONG_TERM},{self.root}-*-memory-{LONG_TERM}-*d"
        self.dimension = 0
        self._client: AsyncOpenSearch | None = None
        self._created: set[str] = set()
        #: container id -> its memory index prefix (it never changes).
        self._prefixes: dict[str, str] = {}
        self.queues = OpenSearchQueues(self.job_index, self.long_term_indices, lease_seconds)

    @property
    def client(self) -> AsyncOpenSearch:
        if self._client is None:
            raise RuntimeError("OpenSearchAgenticStore is not open")
        return self._client

    async def open(self, dimension: int) -> None:
        self.dimension = dimension
        self._client = make_client(self.settings)
        try:
            await run_all(
                self._ensure(self.container_index, CONTAINER_MAPPINGS),
                self._ensure(self.job_index, JOB_MAPPINGS),
                self.queues.open(self.client),
            )
        except BaseException:
            await self.close()
            raise

    async def close(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            await client.close()

    def retention(self) -> RetentionStore:
        return OpenSearchRetention(lambda: self.client, self.container_index, self._index)

    async def _ensure(self, index: str, mappings: Mapping[str, Any], knn: bool = False) -> None:
        if index in self._created:
            return
        settings = {**INDEX_SETTINGS, **({"knn": True} if knn else {})}
        if not await create_index(self.client, index, {"settings": {"index": settings}, "mappings": mappings}):
            await map_added_fields(self.client, index, mappings)
        self._created.add(index)

    def _dimension_of(self, source: Mapping[str, Any]) -> int:
        return int(source.get("configuration", {}).get("embedding_dimension") or self.dimension)

    def _memory_index(self, prefix: str, memory_type: str, dimension: int) -> str:
        """A knn_vector's dimension is fixed at index creation: long-term memories embedded by a model of
        another dimension than the built-in one's (a remote ``embedding_model_id``) have an index of their own."""
        index = f"{self.root}-{prefix}-memory-{memory_type}"
        return f"{index}-{dimension}d" if memory_type == LONG_TERM and dimension != self.dimension else index

    async def _index(self, owner: Principal, container_id: str, memory_type: str) -> str | None:
        """The container's index of a type, created on first use; None if the owner has no such container.

        The prefix never changes and is remembered; the long-term index also depends on the embedding
        dimension, which an update may change, so it is read from the container every time."""
        prefix = self._prefixes.get(container_id)
        dimension = self.dimension
        if prefix is None or memory_type == LONG_TERM:
            container = await self.find_container(owner.organization_id, container_id)
            if container is None:
                return None
            prefix = self._prefixes[container_id] = store_prefix(container.source)
            dimension = self._dimension_of(container.source)
        index = self._memory_index(prefix, memory_type, dimension)
        await self._ensure(index, memory_mappings(memory_type, dimension), knn=memory_type == LONG_TERM)
        return index

    def _scope(self, owner: Principal, container_id: str) -> list[dict[str, Any]]:
        """The filter wrapped around every memory query: the owner and the container."""
        return [*owner_terms(owner), {"term": {"memory_container_id": container_id}}]

    async def _get_owned(
        self, index: str | None, owner: Principal, doc_id: str, container_id: str | None = None
    ) -> dict[str, Any] | None:
        """The doc if it is the owner's (and, for a memory, the container's); None otherwise or without an index."""
        found = await get_document(self.client, index, doc_id) if index else None
        return found if found is not None and in_scope(found, owner, container_id) else None

    async def _scan(self, index: str, filters: list[dict[str, Any]], container: bool = False) -> list[StoredDoc]:
        """Every doc matching ``filters``, oldest first."""
        query = {"query": {"bool": {"filter": filters}}, "_source": {"excludes": ["memory_embedding"]}}
        hits = async_scan(self.client, index=index, query=query, seq_no_primary_term=True, version=True)
        docs = [stored_doc(hit, container) async for hit in hits]
        return sorted(docs, key=lambda doc: (doc.source.get("created_time", 0), doc.id))

    async def _bulk(self, actions: list[dict[str, Any]]) -> None:
        if actions:
            await bulk(self.client, actions, refresh=True)

    async def _delete_matching(self, indices: list[str], filters: list[dict[str, Any]]) -> int:
        """Delete every doc matching ``filters`` (which always hold the owner and container terms)."""
        return len(await delete_by_query(self.client, ",".join(indices), {"bool": {"filter": filters}}))

    async def _container_kept(self, owner: Principal, container_id: str, written: list[str]) -> bool:
        """After a write into a container: whether it still exists; if not, what the write left is deleted.

        OpenSearch has no transaction across indices, so a container deleted
        between a write's check and its bulk (by this server or another) would
        keep the write's documents, unreachable and never erased.  The write is
        refreshed before this check, and a container's delete removes the
        container document before it deletes its memories: so either that
        delete sees these documents, or this check sees the container gone.
        """
        if await self.find_container(owner.organization_id, container_id) is not None:
            return True
        self._prefixes.pop(container_id, None)
        await self._delete_matching([*written, self.job_index], self._scope(owner, container_id))
        return False

    # -- containers -------------------------------------------------------------------

    async def insert_container(self, owner: Principal, container_id: str, doc: dict[str, Any]) -> StoredDoc | None:
        try:
            result = await self.client.index(
                index=self.container_index,
                id=container_id,
                body=with_owner(owner, doc),
                op_type="create",
                refresh="true",
            )
        except ConflictError:
            return None
        self._prefixes[container_id] = store_prefix(doc)
        return StoredDoc(container_id, doc, result["_version"], result["_seq_no"])

    async def get_container(self, owner: Principal, container_id: str) -> StoredDoc | None:
        found = await get_document(self.client, self.container_index, container_id)
        return container_doc(found) if found is not None and usable(found["_source"], owner) else None

    async def find_container(self, organization_id: str, container_id: str) -> StoredDoc | None:
        found = await get_document(self.client, self.container_index, container_id)
        return container_doc(found) if found is not None and found["_source"]["tenant_id"] == organization_id else None

    async def update_container(self, owner: Principal, container_id: str, merge: Merge) -> StoredDoc | None:
        async def attempt() -> StoredDoc | None:
            found = await get_document(self.client, self.container_index, container_id)
            if found is None or not usable(found["_source"], owner):
                return None
            doc = merge(container_doc(found).source)
            result = await self.client.index(
                index=self.container_index,
                id=container_id,
                body=with_owner(container_owner(found["_source"]), doc),  # it stays its owner's
                refresh="true",
                **if_unchanged(found),
            )
            return StoredDoc(container_id, doc, result["_version"], result["_seq_no"])

        return await until_unchanged(attempt, f"memory container [{container_id}]")

    async def delete_container(self, owner: Principal, container_id: str) -> StoredDoc | None:
        found = await self._get_owned(self.container_index, owner, container_id)
        if found is None:
            return None
        prefix, dimension = store_prefix(found["_source"]), self._dimension_of(found["_source"])
        result = await self.client.delete(index=self.container_index, id=container_id, refresh="true")
        memory_indices = [self._memory_index(prefix, memory_type, dimension) for memory_type in MEMORY_TYPES]
        # Every writer's memories go, role holders' too: nothing could reach them any more.
        await self._delete_matching([*memory_indices, self.job_index], container_terms(owner, container_id))
        self._prefixes.pop(container_id, None)
        return StoredDoc(container_id, visible(found["_source"], True), result["_version"], result["_seq_no"])

    async def containers(self, owner: Principal) -> list[StoredDoc]:
        return await self._scan(self.container_index, owner_terms(owner), container=True)

    async def usable_containers(self, caller: Principal) -> list[StoredDoc]:
        return await self._scan(self.container_index, usable_terms(caller), container=True)

    # -- memories -----------------------------------------------------------------------

    def _source(self, owner: Principal, doc: Mapping[str, Any], memory_type: str) -> dict[str, Any]:
        source = with_owner(owner, doc)
        if memory_type == LONG_TERM:
            source["embedding_pending"] = True
        return source

    async def add_memory(self, owner: Principal, container_id: str, add: MemoryAdd) -> bool:
        index = await self._index(owner, container_id, WORKING)
        if index is None:
            return False
        actions: list[dict[str, Any]] = []
        written = [index]
        session = add.session
        if session is not None:
            sessions = await self._index(owner, container_id, SESSIONS)
            if sessions is None:
                return False
            written.append(sessions)
            await self._write_session(owner, container_id, sessions, session)
        actions += [{"create": {"_index": index, "_id": add.working_id}}, self._source(owner, add.working, WORKING)]
        if add.infer_request is not None:
            job = {
                "memory_container_id": container_id,
                "created_time": add.working["created_time"],
                "attempts": 0,
                "working_memory_id": add.working_id,
                "request": add.infer_request,
            }
            actions += [{"index": {"_index": self.job_index}}, with_owner(owner, job)]
        await self._bulk(actions)
        return await self._container_kept(owner, container_id, written)

    async def _write_session(self, owner: Principal, container_id: str, index: str, session: SessionWrite) -> None:
        """Create or touch an add's session, before its working doc; a touch is conditional on the version read,
        and a session changed or gone meanwhile (an update, a retention sweep) is read and written again."""

        async def attempt() -> None:
            found = None if session.drawn else await get_document(self.client, index, session.session_id)
            if found is not None and not in_scope(found, owner, container_id):
                return  # another owner's or container's (indices may be shared): not ours to touch or reveal
            if found is None and session.doc is None:
                return
            fresh = self._source(owner, session.doc or {}, SESSIONS)
            body = fresh if found is None else session.touched(found["_source"])
            condition = {"op_type": "create"} if found is None else if_unchanged(found)
            await self.client.index(index=index, id=session.session_id, body=body, refresh="true", **condition)
            session.created = found is None

        await until_unchanged(attempt, f"session [{session.session_id}]")

    async def create_session(
        self, owner: Principal, container_id: str, session_id: str, doc: dict[str, Any]
    ) -> bool | None:
        index = await self._index(owner, container_id, SESSIONS)
        if index is None:
            return None
        try:
            await self.client.index(
                index=index, id=session_id, body=self._source(owner, doc, SESSIONS), op_type="create", refresh="true"
            )
        except ConflictError:
            return False
        return True if await self._container_kept(owner, container_id, [index]) else None

    async def get(self, owner: Principal, container_id: str, memory_type: str, memory_id: str) -> StoredDoc | None:
        index = await self._index(owner, container_id, memory_type)
        found = await self._get_owned(index, owner, memory_id, container_id)
        return stored_doc(found) if found else None

    async def sources(
        self, owner: Principal, container_id: str, memory_type: str, memory_id: str
    ) -> list[dict[str, Any]] | None:
        index = await self._index(owner, container_id, memory_type)
        found = await self._get_owned(index, owner, memory_id, container_id)
        return sources_of(found["_source"]) if found else None

    async def update(
        self, owner: Principal, container_id: str, memory_type: str, memory_id: str, merge: Merge
    ) -> StoredDoc | None:
        index = await self._index(owner, container_id, memory_type)

        async def attempt() -> StoredDoc | None:
            found = await self._get_owned(index, owner, memory_id, container_id)
            if found is None or index is None:
                return None
            doc = merge(visible(found["_source"]))
            source = self._source(owner, doc, memory_type)
            source.update({k: v for k, v in found["_source"].items() if k == SOURCES})  # hidden: not sent back
            if memory_type == LONG_TERM and not text_changed(memory_type, found["_source"], doc):
                source["embedding_pending"] = found["_source"].get("embedding_pending", False)
                if "memory_embedding" in found["_source"]:
                    source["memory_embedding"] = found["_source"]["memory_embedding"]
            result = await self.client.index(
                index=index, id=memory_id, body=source, refresh="true", **if_unchanged(found)
            )
            return StoredDoc(memory_id, doc, result["_version"], result["_seq_no"])

        return await until_unchanged(attempt, f"memory [{memory_id}]")

    async def delete(self, owner: Principal, container_id: str, memory_type: str, memory_id: str) -> StoredDoc | None:
        index = await self._index(owner, container_id, memory_type)
        found = await self._get_owned(index, owner, memory_id, container_id)
        if found is None:
            return None
        try:
            result = await self.client.delete(index=index, id=memory_id, refresh="true", **if_unchanged(found))
        except (NotFoundError, ConflictError):
            return None
        return StoredDoc(memory_id, visible(found["_source"]), result["_version"], result["_seq_no"])

    async def docs(self, owner: Principal, container_id: str, memory_type: str) -> list[StoredDoc]:
        index = await self._index(owner, container_id, memory_type)
        return await self._scan(index, self._scope(owner, container_id)) if index else []

    def indexed_field(self, path: str) -> bool:
        return exact_anywhere(path)

    async def docs_matching(
        self,
        owner: Principal,
        container_id: str,
        memory_type: str,
        required: ExactTerms,
    ) -> list[StoredDoc]:
        index = await self._index(owner, container_id, memory_type)
        filters = [*self._scope(owner, container_id), *candidate_filters(memory_type, required)]
        return await self._scan(index, filters) if index else []

    async def delete_ids(self, owner: Principal, container_id: str, memory_type: str, ids: Sequence[str]) -> int:
        index = await self._index(owner, container_id, memory_type)
        if index is None or not ids:
            return 0
        deleted = 0
        for start in range(0, len(ids), 1000):
            part = list(ids[start : start + 1000])
            deleted += await self._delete_matching(
                [index], [*self._scope(owner, container_id), {"ids": {"values": part}}]
            )
        return deleted

    async def forget(self, owner: Principal, container_id: str, working_ids: Sequence[str]) -> Forgotten:
        container = await self.get_container(owner, container_id)
        if container is None:
            return Forgotten()
        prefix, dimension, ids = store_prefix(container.source), self._dimension_of(container.source), working_ids
        indices = {memory_type: self._memory_index(prefix, memory_type, dimension) for memory_type in MEMORY_TYPES}
        return await forget(self.client, indices, self.job_index, self._scope(owner, container_id), list(ids))

    async def embeddings(self, owner: Principal, container_id: str, ids: Sequence[str]) -> dict[str, list[float]]:
        index = await self._index(owner, container_id, LONG_TERM)
        if index is None or not ids:
            return {}
        query = {
            "size": len(ids),
            "_source": ["memory_embedding"],
            "query": {"bool": {"filter": [*self._scope(owner, container_id), {"ids": {"values": list(ids)}}]}},
        }
        result = await self.client.search(index=index, body=query)
        return {
            hit["_id"]: hit["_source"]["memory_embedding"]
            for hit in result["hits"]["hits"]
            if "memory_embedding" in hit["_source"]
        }

    # -- background work ------------------------------------------------------------------

    async def pending_embeddings(self, limit: int, skip: Iterable[str] = ()) -> list[PendingEmbedding]:
        return await self.queues.claim_embeddings(self.client, limit, skip)

    async def release_embeddings(self, entries: Sequence[PendingEmbedding]) -> None:
        await self.queues.release_embeddings(self.client, entries)

    async def pending_count(self) -> int:
        return await self.queues.pending_count(self.client)

    async def infer_job_count(self) -> int:
        return int((await self.client.count(index=self.job_index))["count"])

    async def store_embeddings(self, rows: Sequence[tuple[Any, str, np.ndarray]]) -> int:
        return await self.queues.store_embeddings(self.client, rows)

    async def infer_jobs(self, limit: int) -> list[InferJob]:
        return await self.queues.jobs(self.client, limit)

    async def claim_infer_jobs(self, limit: int) -> list[InferJob]:
        return await self.queues.claim_jobs(self.client, limit)

    async def renew_infer_job(self, job: InferJob) -> bool:
        return await self.queues.renew_job(self.client, job)

    async def keep_infer_answers(self, job: InferJob) -> bool:
        return await self.queues.keep_answers(self.client, job)

    async def count_infer_attempt(self, job: InferJob) -> None:
        await self.queues.count_attempt(self.client, job)

    async def apply_infer(
        self, job: InferJob, changes: Sequence[LongTermChange], history: Sequence[tuple[str, dict[str, Any]]]
    ) -> None:
        await apply_infer(self, job, changes, history)

    # -- search -------------------------------------------------------------------------------

    async def _ranked(self, scope: LongTermScope, clause: dict[str, Any], k: int) -> list[tuple[StoredDoc, float]]:
        """Top ``k`` long-term hits of ``clause``, always inside the scope's filters (owner, container, terms)."""
        index = await self._index(scope.owner, scope.container_id, LONG_TERM)
        if index is None or scope.empty:
            return []
        return await ranked(self.client, index, clause, self._filters(scope), k)

    def _filters(self, scope: LongTermScope) -> list[dict[str, Any]]:
        filters = [
            *self._scope(scope.owner, scope.container_id),
            *({"term": {name: value}} for name, value in scope.terms),
        ]
        if scope.only_ids is not None:
            filters.append({"ids": {"values": sorted(scope.only_ids)}})
        return filters

    async def knn(self, scope: LongTermScope, vector: np.ndarray, k: int) -> list[tuple[StoredDoc, float]]:
        query = {"vector": [float(x) for x in vector], "k": k, "filter": {"bool": {"filter": self._filters(scope)}}}
        hits = await self._ranked(scope, {"knn": {"memory_embedding": query}}, k)
        # lucene cosinesimil scores (1 + cos) / 2; the interface speaks cosine
        return [(doc, 2.0 * score - 1.0) for doc, score in hits]

    async def bm25(self, scope: LongTermScope, query: str, k: int) -> list[tuple[StoredDoc, float]]:
        return await self._ranked(scope, {"match": {"memory": query}}, k)
