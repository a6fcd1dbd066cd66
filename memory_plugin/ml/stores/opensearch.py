"""The ml documents in one OpenSearch index, ``{index_prefix}-ml-documents``, shared by every process.

Each document is ``{kind, organization_id, user_id, source}`` under the id
``{kind}:{id}``; ``source`` is kept, not indexed (searches run in Python over
the owner's few documents, as on SQLite).  Creates are ``op_type=create`` and
replaces carry ``if_seq_no``/``if_primary_term``, so concurrent writers from any
number of processes are decided by OpenSearch; every write refreshes, so the
next request on any process reads it.  The master key is the document
``master_key``, created once: the first process to start wins, the others read it.
"""

from __future__ import annotations

import base64
from typing import Any

from opensearchpy import AsyncOpenSearch
from opensearchpy.exceptions import ConflictError, NotFoundError

from memory_plugin.auth import Principal
from memory_plugin.concurrency import run_all
from memory_plugin.ml.budget import Budget
from memory_plugin.ml.stores.base import Kind, MLStore, Owned, StoreConflict, Stored
from memory_plugin.ml.stores.opensearch_budget import MAPPINGS as BUDGET_MAPPINGS
from memory_plugin.ml.stores.opensearch_budget import SharedCallBudget
from memory_plugin.opensearch_client import (
    MAX_RESULT_WINDOW,
    create_index,
    get_document,
    make_client,
    scan,
    seq_no_and_term,
    write_place,
)
from memory_plugin.settings import OpenSearchRegion

MAPPINGS = {
    "dynamic": "strict",
    "properties": {
        "kind": {"type": "keyword"},
        "organization_id": {"type": "keyword"},
        "user_id": {"type": "keyword"},
        "created": {"type": "long"},
        "source": {"type": "object", "enabled": False},
        "key": {"type": "binary"},
    },
}
INDEX_SETTINGS = {"index": {"number_of_shards": 1, "number_of_replicas": 0}}
MASTER_KEY_ID = "master_key"


def _owner_query(kind: Kind | None, owner: Principal) -> dict[str, Any]:
    terms = [{"term": {"organization_id": owner.organization_id}}, {"term": {"user_id": owner.user_id or ""}}]
    if kind is not None:
        terms.append({"term": {"kind": kind}})
    return {"bool": {"filter": terms}}


class OpenSearchMLStore(MLStore):
    def __init__(self, settings: OpenSearchRegion) -> None:
        self.settings = settings
        self.index = f"{settings.index_prefix.lower()}-ml-documents"
        #: The organisations' call budgets, counted here for every process (``opensearch_budget``).
        self.budget_index = f"{settings.index_prefix.lower()}-ml-budgets"
        self._client: AsyncOpenSearch | None = None

    @property
    def client(self) -> AsyncOpenSearch:
        if self._client is None:
            raise RuntimeError("OpenSearchMLStore is not open")
        return self._client

    async def open(self) -> None:
        self._client = make_client(self.settings)
        try:
            await run_all(
                create_index(self.client, self.index, {"settings": INDEX_SETTINGS, "mappings": MAPPINGS}),
                create_index(self.client, self.budget_index, {"settings": INDEX_SETTINGS, "mappings": BUDGET_MAPPINGS}),
            )
        except BaseException:
            await self.close()
            raise

    async def close(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            await client.close()

    def call_budget(self, per_minute: int, concurrent: int, call_seconds: float) -> Budget:
        """Counted in the cluster: an organisation's budget holds across every process and host."""
        return SharedCallBudget(lambda: self.client, self.budget_index, per_minute, concurrent, call_seconds)

    async def master_key(self, proposed: bytes) -> bytes:
        body = {"kind": "master_key", "key": base64.b64encode(proposed).decode("ascii")}
        try:
            await self.client.index(index=self.index, id=MASTER_KEY_ID, body=body, op_type="create", refresh="true")
            return proposed
        except ConflictError:
            kept = await get_document(self.client, self.index, MASTER_KEY_ID)
            assert kept is not None
            return base64.b64decode(kept["_source"]["key"])

    async def create(self, kind: Kind, owner: Principal, doc_id: str, source: dict[str, Any]) -> None:
        body = {
            "kind": kind,
            "organization_id": owner.organization_id,
            "user_id": owner.user_id or "",
            "source": source,
        }
        try:
            await self.client.index(
                index=self.index, id=f"{kind}:{doc_id}", body=body, op_type="create", refresh="true"
            )
        except ConflictError:
            raise StoreConflict(doc_id) from None

    async def _read(self, kind: Kind, owner: Principal, doc_id: str) -> dict[str, Any] | None:
        found = await get_document(self.client, self.index, f"{kind}:{doc_id}")
        if found is None:
            return None
        document = found["_source"]
        if document.get("organization_id") != owner.organization_id or document.get("user_id") != (owner.user_id or ""):
            return None
        return found

    async def get(self, kind: Kind, owner: Principal, doc_id: str) -> Stored | None:
        found = await self._read(kind, owner, doc_id)
        return _stored(doc_id, found) if found else None

    async def replace(self, kind: Kind, owner: Principal, current: Stored, source: dict[str, Any]) -> bool:
        seq_no, primary_term = seq_no_and_term(current.version)
        body = {
            "kind": kind,
            "organization_id": owner.organization_id,
            "user_id": owner.user_id or "",
            "source": source,
        }
        try:
            await self.client.index(
                index=self.index,
                id=f"{kind}:{current.id}",
                body=body,
                if_seq_no=seq_no,
                if_primary_term=primary_term,
                refresh="true",
            )
        except ConflictError:
            return False
        return True

    async def delete(self, kind: Kind, owner: Principal, doc_id: str) -> bool:
        found = await self._read(kind, owner, doc_id)
        if found is None:
            return False
        try:
            await self.client.delete(
                index=self.index,
                id=f"{kind}:{doc_id}",
                if_seq_no=found["_seq_no"],
                if_primary_term=found["_primary_term"],
                refresh="true",
            )
        except (NotFoundError, ConflictError):
            return False
        return True

    async def all(self, kind: Kind, owner: Principal) -> list[Stored]:
        """In the order of their last write, as ml-commons' own indices list them until a merge reorders them.

        ``_doc`` order is that order only until a background merge rewrites the segments, and this one index
        holds every kind, so it merges sooner than ml-commons' index per kind: ``_seq_no`` keeps the order."""
        response = await self.client.search(
            index=self.index,
            body={"query": _owner_query(kind, owner), "sort": ["_seq_no"], "seq_no_primary_term": True},
            size=MAX_RESULT_WINDOW,
        )
        prefix = f"{kind}:"
        return [_stored(hit["_id"].removeprefix(prefix), hit) for hit in response["hits"]["hits"]]

    async def find(self, kind: Kind, organization_id: str, doc_id: str) -> Owned | None:
        found = await get_document(self.client, self.index, f"{kind}:{doc_id}")
        if found is None or found["_source"].get("organization_id") != organization_id:
            return None
        return _owned(doc_id, found)

    async def organization(self, kind: Kind, organization_id: str) -> list[Owned]:
        """In the order of their last write, as ``all`` lists them."""
        query = {"bool": {"filter": [{"term": {"organization_id": organization_id}}, {"term": {"kind": kind}}]}}
        response = await self.client.search(
            index=self.index,
            body={"query": query, "sort": ["_seq_no"], "seq_no_primary_term": True},
            size=MAX_RESULT_WINDOW,
        )
        prefix = f"{kind}:"
        return [_owned(hit["_id"].removeprefix(prefix), hit) for hit in response["hits"]["hits"]]

    async def erase(self, owner: Principal) -> int:
        hits = [hit async for hit in scan(self.client, self.index, _owner_query(None, owner))]
        for hit in hits:
            await self.client.delete(index=self.index, id=hit["_id"], refresh="true", ignore=(404,))
        return len(hits)


def _stored(doc_id: str, hit: dict[str, Any]) -> Stored:
    """The version is the write's place (``_seq_no`` and ``_primary_term``), which ``replace`` writes against."""
    return Stored(doc_id, hit["_source"]["source"], write_place(hit))


def _owned(doc_id: str, hit: dict[str, Any]) -> Owned:
    document = hit["_source"]
    return Owned(Principal(document["organization_id"], document.get("user_id") or None), _stored(doc_id, hit))
