"""Retention on OpenSearch: deletes conditional on ``if_seq_no``/``if_primary_term`` of the sweep's read."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from opensearchpy import AsyncOpenSearch
from opensearchpy.exceptions import TransportError
from opensearchpy.helpers import async_scan

from memory_plugin.agentic.stores.base import StoredDoc, owner_of
from memory_plugin.agentic.stores.opensearch_documents import container_terms, stored_doc, visible
from memory_plugin.agentic.stores.retention import RetentionStore, Snapshot
from memory_plugin.auth import Principal

#: Deletes per bulk request.
BULK = 500


#: A container's index of a memory type, for a scope of its organisation; None if there is no such container.
MemoryIndex = Callable[[Principal, str, str], Awaitable[str | None]]


class OpenSearchRetention(RetentionStore):
    """Made by ``OpenSearchAgenticStore.retention``, which hands over its client, its container index and how it
    finds a container's memory index."""

    def __init__(self, client: Callable[[], AsyncOpenSearch], container_index: str, memory_index: MemoryIndex) -> None:
        """``client``: the store's, once it is open."""
        self._client = client
        self.container_index = container_index
        self.memory_index = memory_index

    @property
    def client(self) -> AsyncOpenSearch:
        return self._client()

    async def every_container(self) -> list[tuple[Principal, StoredDoc]]:
        hits = async_scan(self.client, index=self.container_index, query={"query": {"match_all": {}}})
        return [
            (owner_of(hit["_source"].get("tenant_id", ""), hit["_source"].get("owner_id", "")), stored_doc(hit, True))
            async for hit in hits
        ]

    async def snapshot(self, organization_id: str, container_id: str, memory_type: str) -> list[Snapshot]:
        scope = Principal(organization_id)
        index = await self.memory_index(scope, container_id, memory_type)
        if index is None:
            return []
        query = {
            "query": {"bool": {"filter": container_terms(scope, container_id)}},
            "_source": {"excludes": ["memory_embedding"]},
        }
        hits = async_scan(self.client, index=index, query=query, seq_no_primary_term=True)
        return [
            Snapshot(hit["_id"], visible(hit["_source"]), (hit["_index"], hit["_seq_no"], hit["_primary_term"]))
            async for hit in hits
        ]

    async def delete_unchanged(
        self, organization_id: str, container_id: str, memory_type: str, docs: Sequence[Snapshot]
    ) -> list[str]:
        deleted: list[str] = []
        for start in range(0, len(docs), BULK):
            actions: list[dict[str, Any]] = []
            for doc in docs[start : start + BULK]:
                index, seq_no, primary_term = doc.token
                actions.append(
                    {"delete": {"_index": index, "_id": doc.id, "if_seq_no": seq_no, "if_primary_term": primary_term}}
                )
            response = await self.client.bulk(body=actions, refresh="true")
            for item in response["items"]:
                result = item["delete"]
                if result.get("result") == "deleted":
                    deleted.append(result["_id"])
                elif result.get("status") not in (404, 409):
                    raise TransportError(result.get("status", 500), "bulk_delete_failure", result.get("error"))
        return deleted
