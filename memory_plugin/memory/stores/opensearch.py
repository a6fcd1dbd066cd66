"""Conversational memory kept in a real OpenSearch cluster, in ML Commons-like indices.

``OpenSearchMemoryStore`` behaves exactly like ``SqliteMemoryStore``; it is
chosen when the home region is served by OpenSearch (``services.py``).

Two indices per deployment, ``{index_prefix}-memory-meta`` and
``{index_prefix}-memory-message``, mapped as ml-commons maps its own, plus
our ``memory_plugin`` object (owner, exact times, exact ``additional_info``);
``opensearch_schema.py`` maps them (and migrates an older schema), and
``opensearch_documents.py`` converts documents to and from the models.

Consistency
-----------
Every write passes ``refresh=true`` (ML Commons' ``RefreshPolicy.IMMEDIATE``):
the very next read, a search included, sees it.  ``wait_for`` would be cheaper
for the cluster under heavy write load but makes each write wait for the next
scheduled refresh (up to ``refresh_interval``, 1 s by default).  Reads of one
document use the real-time GET API.

Read-modify-write (``update_conversation``, ``update_interaction``) rewrites
the whole document under optimistic concurrency control
(``if_seq_no``/``if_primary_term``) and retries on a conflict, so concurrent
writers never lose each other's change.

Added messages are group-committed (``group_commit.py``), one ``_bulk`` for the
messages and one for their memories' ``updated_time`` bumps (``opensearch_adds.py``).
A whole-document rewrite (not a partial ``_update``) is used because partial
updates merge object fields, and ``additional_info`` must be replaced.

Races with ``delete_conversation`` (SQLite has none, having transactions):
the meta document goes first, then the messages are collected by a search
and deleted by id in bulk.  A concurrent ``add_interaction`` either wrote its
message before the messages were collected (and it is deleted with them) or finds the meta document gone when it bumps ``updated_time``; it
then deletes its own message and answers False.  A process killed in the
middle of a delete can leave messages without a conversation behind; they
can still be read by id, but never listed.

Pages of messages are kept by the server (``RenderedPages``) under the memory's
version, its document's ``_primary_term`` and ``_seq_no`` read real-time
(``messages_version``, one ``_mget`` for the readers asking together): a page
read again costs OpenSearch a share of that ``_mget`` instead of a search, and
whatever process wrote the memory meanwhile retires it.

Paging beyond ``index.max_result_window`` (10000) uses ``search_after`` over
the same sort, so every offset gives the same answer as SQLite.

``_search`` runs inside OpenSearch: the caller's body is checked and wrapped in
the owner's filter by ``scoped_search.py``, and only the hits of one page come
back, however long the owner's history.

With the bridge on, ``opensearch_outbox.py`` keeps its entries beside the
changes they mirror.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from opensearchpy import AsyncOpenSearch
from opensearchpy.exceptions import ConflictError, NotFoundError, TransportError

from memory_plugin.auth import Principal
from memory_plugin.dsl import MESSAGE_INDEX, META_INDEX
from memory_plugin.errors import RelayedBadRequest, Unavailable
from memory_plugin.memory.documents import memory_source, message_source
from memory_plugin.memory.models import Conversation, Document, Interaction, Updated
from memory_plugin.memory.stores.base import MemoryStore, OutboxEntry, OutboxLag
from memory_plugin.memory.stores.group_commit import GroupCommit
from memory_plugin.memory.stores.opensearch_adds import RETRIES, add_messages
from memory_plugin.memory.stores.opensearch_documents import (
    EXACT_CREATED,
    OWN_ID,
    conversation_source,
    interaction_source,
    merge_into,
    owned,
    owner_filter,
    read_conversation,
    read_interaction,
)
from memory_plugin.memory.stores.opensearch_outbox import OpenSearchOutbox
from memory_plugin.memory.stores.opensearch_schema import MESSAGE_MAPPINGS, META_MAPPINGS, SCHEMA_VERSION, ensure_index
from memory_plugin.memory.stores.scoped_search import (
    INTERNAL_FIELD,
    ScopedSearch,
    public_error,
    public_response,
    scoped_search,
)
from memory_plugin.opensearch_client import (
    MAX_ID_BYTES,
    MAX_RESULT_WINDOW,
    delete_by_query,
    get_document,
    get_documents,
    id_bytes,
    make_client,
    write_place,
)
from memory_plugin.settings import OpenSearchRegion


class OpenSearchMemoryStore(MemoryStore):
    shared = True

    def __init__(self, settings: OpenSearchRegion, *, outbox: bool = False) -> None:
        self.settings = settings
        self.outbox = outbox
        prefix = settings.index_prefix.lower()  # index names are lowercase, as in the region store
        #: The names every read and write uses: aliases of the current schema's versioned indices.
        self.meta_index = f"{prefix}-memory-meta"
        self.message_index = f"{prefix}-memory-message"
        self.outbox_index = f"{prefix}-memory-outbox"
        self._outbox_entries = OpenSearchOutbox(self.outbox_index, self.meta_index, self.message_index)
        #: ``index.max_result_window``; deeper pages go through ``search_after``.
        self.max_result_window = MAX_RESULT_WINDOW
        self._client: AsyncOpenSearch | None = None
        #: Messages added together are written together (``group_commit.py``).
        self._adds: GroupCommit[Interaction, bool] = GroupCommit(self._add_interactions)
        #: Memories' versions asked for together are read together, each by a request sent after it was asked.
        self._versions: GroupCommit[str, int | None] = GroupCommit(self._read_versions)

    @property
    def client(self) -> AsyncOpenSearch:
        if self._client is None:
            raise RuntimeError("OpenSearchMemoryStore is not open")
        return self._client

    # -- lifecycle ------------------------------------------------------------------

    async def open(self) -> None:
        self._client = make_client(self.settings)
        try:
            await ensure_index(self.client, self.meta_index, META_MAPPINGS, conversation_source, read_conversation)
            await ensure_index(self.client, self.message_index, MESSAGE_MAPPINGS, interaction_source, read_interaction)
            if self.outbox:  # only the bridge reads it
                await self._outbox_entries.create(self.client)
        except BaseException:
            await self.close()
            raise

    async def close(self) -> None:
        await self._adds.idle()
        await self._versions.idle()
        if self._client is not None:
            client, self._client = self._client, None
            await client.close()

    async def health(self) -> dict[str, Any]:
        health = await self.client.cluster.health(index=[self.meta_index, self.message_index])
        count = await self.client.count(index=self.meta_index)
        return {"status": health["status"], "conversations": count["count"]}

    # -- low-level helpers -------------------------------------------------------------

    async def _enqueue(
        self,
        kind: Literal["index", "delete"],
        owner: Principal,
        conversation_id: str,
        interaction_id: str | None = None,
    ) -> None:
        if self.outbox:
            await self._outbox_entries.enqueue(self.client, kind, owner, conversation_id, interaction_id)

    async def _get_owned(self, index: str, doc_id: str, owner: Principal) -> dict[str, Any] | None:
        document = await get_document(self.client, index, doc_id)
        if document is None or not owned(document["_source"], owner):
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
            result = await self.client.search(index=index, body=page_body(query, sort, offset, limit))
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
        for attempt in range(RETRIES):
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
                # Jittered and growing: writers in other processes retry too, and would collide again in step.
                await asyncio.sleep(random.uniform(0, min(0.2, 0.002 * 2**attempt)))
                continue
            except NotFoundError:
                return None
            return source, written["_version"], True
        raise Unavailable(f"[{doc_id}] is being changed by too many requests at once ({RETRIES} conflicts); retry")

    async def _update(
        self,
        index: str,
        doc_id: str,
        owner: Principal,
        changes: Mapping[str, Any],
        read: Callable[[str, Mapping[str, Any], int], Document],
    ) -> Updated[Document] | None:
        """``changes`` merged in as a partial document update merges them; ``noop`` when nothing changed."""
        rewritten = await self._rewrite(index, doc_id, owner, lambda source: merge_into(source, changes))
        if rewritten is None:
            return None
        source, version, written = rewritten
        return Updated(read(doc_id, source, version), "updated" if written else "noop")

    # -- conversations ---------------------------------------------------------------------

    async def add_conversation(self, conversation: Conversation) -> None:
        await self.client.index(
            index=self.meta_index,
            id=conversation.conversation_id,
            body=conversation_source(conversation),
            op_type="create",
            refresh="true",
        )

    async def get_conversation(self, owner: Principal, conversation_id: str) -> Conversation | None:
        document = await self._get_owned(self.meta_index, conversation_id, owner)
        return (
            None if document is None else read_conversation(conversation_id, document["_source"], document["_version"])
        )

    async def list_conversations(
        self, owner: Principal, offset: int, limit: int, by: str = "create_time"
    ) -> list[Conversation]:
        field = {"create_time": EXACT_CREATED, "updated_time": f"{INTERNAL_FIELD}.updated_time"}[by]
        hits = await self._search(
            self.meta_index,
            {"bool": {"filter": owner_filter(owner)}},
            [{field: {"order": "desc"}}, {OWN_ID: {"order": "desc"}}],
            offset,
            limit,
        )
        return [read_conversation(hit["_id"], hit["_source"], hit["_version"]) for hit in hits]

    async def update_conversation(
        self, owner: Principal, conversation_id: str, changes: Mapping[str, Any]
    ) -> Updated[Conversation] | None:
        return await self._update(self.meta_index, conversation_id, owner, changes, read_conversation)

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
        query = {"bool": {"filter": owner_filter(owner)}}
        # Messages first: a crash between the two leaves memories to erase again, never orphan messages.
        messages = await delete_by_query(self.client, self.message_index, query)
        memories = await delete_by_query(self.client, self.meta_index, query)
        return len(memories), len(messages)

    # -- interactions --------------------------------------------------------------------------

    async def add_interaction(self, interaction: Interaction) -> bool:
        return await self._adds.submit(interaction)

    async def _add_interactions(self, interactions: Sequence[Interaction]) -> list[bool | Exception]:
        outbox = self._outbox_entries if self.outbox else None
        return await add_messages(self.client, self.meta_index, self.message_index, outbox, interactions)

    async def get_interaction(self, owner: Principal, interaction_id: str) -> Interaction | None:
        document = await self._get_owned(self.message_index, interaction_id, owner)
        return None if document is None else read_interaction(interaction_id, document["_source"], document["_version"])

    async def current_interactions(self, interactions: Sequence[Interaction]) -> list[Interaction | None]:
        found = await get_documents(self.client, self.message_index, [i.interaction_id for i in interactions])
        current: list[Interaction | None] = []
        for interaction in interactions:
            document = found.get(interaction.interaction_id)
            owners = document is not None and owned(document["_source"], interaction.owner)
            current.append(
                read_interaction(interaction.interaction_id, document["_source"], document["_version"])
                if document is not None and owners
                else None
            )
        return current

    async def list_interactions(
        self, owner: Principal, conversation_id: str, offset: int, limit: int, newest_first: bool
    ) -> list[Interaction] | None:
        direction = "desc" if newest_first else "asc"
        query = {
            "bool": {
                "filter": [{"term": {"memory_id": conversation_id}}],
                "must_not": [{"exists": {"field": "trace_number"}}],
            }
        }
        sort = [{EXACT_CREATED: {"order": direction}}, {OWN_ID: {"order": direction}}]
        hits = await self._page_of_owned(conversation_id, owner, self.message_index, query, sort, offset, limit)
        if hits is None:
            return None
        return [read_interaction(hit["_id"], hit["_source"], hit["_version"]) for hit in hits]

    async def _page_of_owned(
        self,
        conversation_id: str,
        owner: Principal,
        index: str,
        query: Mapping[str, Any],
        sort: list[Any],
        offset: int,
        limit: int,
    ) -> list[dict[str, Any]] | None:
        """A page of ``index``, or None if the memory is not ``owner``'s: in one ``_msearch`` where the page is
        within the result window (ml-commons reads the memory, then searches, inside the node; a second request
        from us cost the node more than the search). The memory is found by a search on its id and owner, not a
        real-time get: every write of a memory is refreshed before it is acknowledged, so a search sees what a
        get would. On any error of either search, or a shard that failed it (a memory missed there is not a
        404), the get and the search are sent again, one after the other, for their own errors and retries."""
        if 0 < limit and offset + limit <= self.max_result_window and 0 < id_bytes(conversation_id) <= MAX_ID_BYTES:
            owned = {"bool": {"filter": [{"ids": {"values": [conversation_id]}}, *owner_filter(owner)]}}
            searches = [
                {"index": self.meta_index},
                {"query": owned, "size": 0, "track_total_hits": 1},
                {"index": index},
                page_body(query, sort, offset, limit),
            ]
            memory, page = (await self.client.msearch(body=searches))["responses"]
            if answered_whole(memory) and answered_whole(page):
                return list(page["hits"]["hits"]) if memory["hits"]["total"]["value"] else None
        if await self._get_owned(self.meta_index, conversation_id, owner) is None:
            return None
        return await self._search(index, query, sort, offset, limit)

    async def list_traces(
        self, owner: Principal, interaction_id: str, offset: int, limit: int
    ) -> list[Interaction] | None:
        if await self._get_owned(self.message_index, interaction_id, owner) is None:
            return None
        # A trace names its parent freely: only the owner's own traces are listed.
        query = {"bool": {"filter": [{"term": {"parent_message_id": interaction_id}}, *owner_filter(owner)]}}
        # SQLite sorts NULL first in ascending order.
        sort = [
            {"trace_number": {"order": "asc", "missing": "_first"}},
            {EXACT_CREATED: {"order": "asc"}},
            {OWN_ID: {"order": "asc"}},
        ]
        hits = await self._search(self.message_index, query, sort, offset, limit)
        return [read_interaction(hit["_id"], hit["_source"], hit["_version"]) for hit in hits]

    async def update_interaction(
        self, owner: Principal, interaction_id: str, changes: Mapping[str, Any]
    ) -> Updated[Interaction] | None:
        if self.outbox and "response" in changes:  # first, so that a crash cannot leave the new text unindexed
            current = await self._get_owned(self.message_index, interaction_id, owner)
            if current is None:
                return None
            await self._enqueue("index", owner, current["_source"]["memory_id"], interaction_id)
        updated = await self._update(self.message_index, interaction_id, owner, changes, read_interaction)
        if updated is not None and updated.result == "updated":
            await self._count_edit(updated.document.conversation_id)
        return updated

    async def _count_edit(self, conversation_id: str) -> None:
        """Write the memory after one of its messages changed (and was refreshed): its version moves."""
        script = {"lang": "painless", "source": _COUNT_EDIT}
        try:
            await self.client.update(
                index=self.meta_index, id=conversation_id, body={"script": script}, retry_on_conflict=RETRIES
            )
        except NotFoundError:
            pass  # deleted meanwhile: no page of it is served any more

    async def messages_version(self, conversation_id: str) -> int | None:
        """The memory document's place in its shard's history, read real-time (``_source`` left out).

        Every write that changes a memory's pages writes the memory document once its messages are
        refreshed: an add bumps ``updated_time`` (``opensearch_adds.py``), a message update counts
        itself (``message_edits``), a delete removes it.  So a page read after this version was taken
        is at least as new as the version, in any process.  A write interrupted between the two
        steps (never acknowledged) shows in pages kept here only from the memory's next write.

        Readers asking at once share one ``_mget`` (``GroupCommit``): each one's is sent after it asked,
        so it sees every write acknowledged before that."""
        return await self._versions.submit(conversation_id)

    async def _read_versions(self, conversation_ids: Sequence[str]) -> list[int | None]:
        try:
            found = await get_documents(self.client, self.meta_index, conversation_ids, source=False)
        except TransportError:  # one reader's id must not fail the others: unknown, so nothing is served kept
            return [None] * len(conversation_ids)
        return [write_place(found[cid]) if cid in found else None for cid in conversation_ids]

    # -- the history bridge's outbox ----------------------------------------------------------------

    async def outbox_pending(self, limit: int, now: float) -> list[OutboxEntry]:
        return await self._outbox_entries.pending(self.client, limit, now)

    async def outbox_done(self, entries: Sequence[OutboxEntry]) -> None:
        await self._outbox_entries.done(self.client, entries)

    async def outbox_retry(self, entries: Sequence[OutboxEntry], not_before: float) -> None:
        await self._outbox_entries.retry(self.client, entries, not_before)

    async def outbox_lag(self) -> OutboxLag:
        return await self._outbox_entries.lag(self.client)

    # -- _search, run by OpenSearch itself ----------------------------------------------------------

    async def search_conversations(self, owner: Principal, body: Mapping[str, Any] | None) -> dict[str, Any]:
        search = scoped_search(body, scope=owner_filter(owner))
        return await self._run_scoped(
            self.meta_index, META_INDEX, search, lambda doc_id, source: memory_source(read_conversation(doc_id, source))
        )

    async def search_interactions(
        self, owner: Principal, conversation_id: str, body: Mapping[str, Any] | None
    ) -> dict[str, Any]:
        # ml-commons adds the memory as a scoring ``must`` clause; the owner is a filter.
        memory = {"term": {"memory_id": conversation_id}}
        search = scoped_search(body, must=[memory], scope=owner_filter(owner))
        return await self._run_scoped(
            self.message_index,
            MESSAGE_INDEX,
            search,
            lambda doc_id, source: message_source(read_interaction(doc_id, source)),
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


#: A message update's write of its memory: no field a reader sees changes, ``_version`` and ``_seq_no`` move.
_COUNT_EDIT = (
    f"def own = ctx._source['{INTERNAL_FIELD}'];"
    " own.message_edits = (own.message_edits == null ? 0 : own.message_edits) + 1;"
)


def page_body(query: Mapping[str, Any], sort: list[Any], offset: int, limit: int) -> dict[str, Any]:
    """The body of one page within the result window: ``sort`` order, versions, no total."""
    return {"query": query, "sort": sort, "from": offset, "size": limit, "track_total_hits": False, "version": True}


def answered_whole(response: Mapping[str, Any]) -> bool:
    """An ``_msearch`` item that is neither an error nor missing a failed shard's hits."""
    return "error" not in response and not response.get("_shards", {}).get("failed")
