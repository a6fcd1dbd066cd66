"""The history bridge's outbox in the OpenSearch memory store: ``{index_prefix}-memory-outbox``.

It is apart from the store (``opensearch.py``) because only the bridge reads it: the store writes
an entry beside each change the bridge mirrors, and the bridge takes, retries and drops them here.

With the bridge on, an added message and its "index" entry go in one bulk request with
``refresh=true``; an update or a conversation delete writes its entry first, so that a crash can
leave an entry without its change (harmless: the bridge reads the memory as it is when it takes
the entry, and a "delete" entry waits while its conversation still exists), never a change
without its entry.

Every server process in front of the cluster drains this outbox: each entry
is claimed with a lease (``memory_plugin.leases``) before it is worked on, and
dropped or retried only by the process that still holds it.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Sequence
from typing import Any, Literal

from opensearchpy import AsyncOpenSearch

from memory_plugin.auth import Principal
from memory_plugin.clock import new_id
from memory_plugin.leases import (
    LEASE_MAPPINGS,
    OUTBOX_LEASE_SECONDS,
    RELEASED,
    claim,
    conditional_bulk,
    ensure_lease_fields,
    leased,
    unleased,
)
from memory_plugin.memory.stores.base import OutboxEntry, OutboxLag
from memory_plugin.memory.stores.opensearch_documents import (
    owned,
    owner_fields,
    principal_of,
    read_interaction,
)
from memory_plugin.memory.stores.opensearch_schema import INDEX_SETTINGS
from memory_plugin.opensearch_client import bulk, create_index, get_documents

_KEYWORD = {"type": "keyword"}

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
        **LEASE_MAPPINGS,
    },
}
_OUTBOX_ORDER = [{"enqueued_at": {"order": "asc"}}, {"entry_id": {"order": "asc"}}]


class OpenSearchOutbox:
    """The outbox index, and the memory and message indices its entries point into.

    It holds no client: the store opens and closes that, and passes it to every call.
    """

    def __init__(self, index: str, meta_index: str, message_index: str) -> None:
        self.index = index
        self.meta_index = meta_index
        self.message_index = message_index
        #: How long a claim holds an entry (tests shorten it).
        self.lease_seconds = OUTBOX_LEASE_SECONDS

    async def create(self, client: AsyncOpenSearch) -> None:
        if not await create_index(client, self.index, {"settings": INDEX_SETTINGS, "mappings": OUTBOX_MAPPINGS}):
            await ensure_lease_fields(client, self.index)  # an outbox of a version before leases

    def entry_action(
        self, kind: Literal["index", "delete"], owner: Principal, conversation_id: str, interaction_id: str | None
    ) -> list[dict[str, Any]]:
        """The bulk lines that create one outbox entry."""
        entry_id = new_id()
        source = {
            "entry_id": entry_id,
            "kind": kind,
            **owner_fields(owner),
            "memory_id": conversation_id,
            "message_id": interaction_id,
            "enqueued_at": time.time(),
            "attempts": 0,
            "not_before": 0.0,
        }
        return [{"create": {"_index": self.index, "_id": entry_id}}, source]

    async def enqueue(
        self,
        client: AsyncOpenSearch,
        kind: Literal["index", "delete"],
        owner: Principal,
        conversation_id: str,
        interaction_id: str | None = None,
    ) -> None:
        await bulk(client, self.entry_action(kind, owner, conversation_id, interaction_id), refresh=True)

    async def pending(self, client: AsyncOpenSearch, limit: int, now: float) -> list[OutboxEntry]:
        # Each organisation's oldest ``limit`` (one collapsed group each), taken in turns as the
        # SQLite store does, so that one organisation's burst does not hold another's behind it.
        # Only entries nobody holds, and of those only the ones this process's claim won.
        body = {
            "query": {"bool": {"filter": [{"range": {"not_before": {"lte": now}}}, unleased(now)]}},
            "sort": _OUTBOX_ORDER,
            "size": limit,
            "collapse": {
                "field": "organization_id",
                "inner_hits": {"name": "oldest", "size": limit, "sort": _OUTBOX_ORDER, "seq_no_primary_term": True},
            },
        }
        groups = (await client.search(index=self.index, body=body))["hits"]["hits"]
        queues = [group["inner_hits"]["oldest"]["hits"]["hits"] for group in groups]
        turns = (queue[turn] for turn in range(limit) for queue in queues if turn < len(queue))
        candidates = [{**hit, "_index": self.index} for hit in itertools.islice(turns, limit)]
        claimed = await claim(client, candidates, leased(now, self.lease_seconds))
        hits = [hit for hit, _ in claimed]
        sources = [hit["_source"] for hit in hits]
        message_ids = sorted({s["message_id"] for s in sources if s["kind"] == "index" and s.get("message_id")})
        memory_ids = sorted({s["memory_id"] for s in sources})
        messages = {
            i: doc["_source"] for i, doc in (await get_documents(client, self.message_index, message_ids)).items()
        }
        memories = {i: doc["_source"] for i, doc in (await get_documents(client, self.meta_index, memory_ids)).items()}
        entries = []
        for (hit, lease), source in zip(claimed, sources):
            owner = principal_of(source)  # an entry's owner fields are top level
            alive = source["memory_id"] in memories and owned(memories[source["memory_id"]], owner)
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
                    interaction=read_interaction(source["message_id"], message) if message and alive else None,
                    conversation_exists=alive,
                    lease=lease,
                )
            )
        return entries

    async def done(self, client: AsyncOpenSearch, entries: Sequence[OutboxEntry]) -> None:
        actions = [{"delete": {"_index": self.index, "_id": entry.entry_id, **_held(entry)}} for entry in entries]
        await conditional_bulk(client, actions, refresh=True)  # an entry taken over since is its new holder's

    async def retry(self, client: AsyncOpenSearch, entries: Sequence[OutboxEntry], not_before: float) -> None:
        actions: list[dict[str, Any]] = []
        for entry in entries:
            actions.append({"update": {"_index": self.index, "_id": entry.entry_id, **_held(entry)}})
            actions.append({"doc": {"attempts": entry.attempts + 1, "not_before": not_before, **RELEASED}})
        await conditional_bulk(client, actions, refresh=True)

    async def lag(self, client: AsyncOpenSearch) -> OutboxLag:
        body = {"query": {"match_all": {}}, "sort": _OUTBOX_ORDER, "size": 1, "track_total_hits": True}
        hits = (await client.search(index=self.index, body=body))["hits"]
        oldest = hits["hits"][0]["_source"]["enqueued_at"] if hits["hits"] else None
        return OutboxLag(hits["total"]["value"], oldest)


def _held(entry: OutboxEntry) -> dict[str, int]:
    """The condition of a write that finishes an entry: it is still as our claim left it."""
    return entry.lease.condition() if entry.lease else {}
