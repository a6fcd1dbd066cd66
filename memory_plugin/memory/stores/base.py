"""Where conversations and interactions live: the interface the memory service needs.

``stores/sqlite.py`` is the embedded default and ``stores/opensearch.py`` keeps
them in an OpenSearch cluster.  Every read and write names its owner, and a
row of another owner is treated as if it did not exist.
"""

from __future__ import annotations

import abc
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from memory_plugin.auth import Principal
from memory_plugin.dsl import (
    KEYWORD,
    MESSAGE_FIELDS,
    MESSAGE_INDEX,
    META_FIELDS,
    Bool,
    Fields,
    SearchBody,
    SourceFilter,
    TermScore,
    bounded,
    execute,
    parse_search,
    search_response,
)
from memory_plugin.errors import InvalidArgument, ShardFailure
from memory_plugin.leases import Lease
from memory_plugin.memory.documents import memory_source, message_source
from memory_plugin.memory.models import Conversation, Interaction, Updated


@dataclass(frozen=True)
class OutboxEntry:
    """A note for the history bridge, written durably with the memory change that caused it.

    ``index``: make the interaction searchable as it is now (``interaction``, read when the
    entry is taken; None once it or its conversation is gone: nothing to index).
    ``delete``: remove the conversation's records (``conversation_exists``: the delete
    itself has not happened, or not yet, so the entry must wait).
    """

    entry_id: str
    kind: Literal["index", "delete"]
    owner: Principal
    conversation_id: str
    #: Unix seconds when the memory change committed.
    enqueued_at: float
    attempts: int
    interaction: Interaction | None = None
    conversation_exists: bool = False
    #: This process's hold on the entry, where several processes share the outbox (OpenSearch).
    lease: Lease | None = field(default=None, compare=False)


@dataclass(frozen=True)
class OutboxLag:
    backlog: int
    #: Unix seconds of the oldest pending entry, None when the outbox is empty.
    oldest_enqueued_at: float | None


class MemoryStore(abc.ABC):
    #: Write an outbox entry with every change the history bridge must mirror (the bridge is on).
    outbox: bool = False
    #: Other processes work on the same data (OpenSearch): the outbox's entries are leased, and what was
    #: read may have changed by the time it is applied.
    shared: bool = False

    @abc.abstractmethod
    async def open(self) -> None: ...

    @abc.abstractmethod
    async def close(self) -> None: ...

    @abc.abstractmethod
    async def add_conversation(self, conversation: Conversation) -> None: ...

    @abc.abstractmethod
    async def get_conversation(self, owner: Principal, conversation_id: str) -> Conversation | None: ...

    @abc.abstractmethod
    async def list_conversations(
        self, owner: Principal, offset: int, limit: int, by: str = "create_time"
    ) -> list[Conversation]:
        """Newest first by ``by`` (``create_time`` or ``updated_time``), ties by id."""

    @abc.abstractmethod
    async def update_conversation(
        self, owner: Principal, conversation_id: str, changes: Mapping[str, Any]
    ) -> Updated[Conversation] | None:
        """Merge ``changes`` in as a partial document update does; None if unknown."""

    @abc.abstractmethod
    async def delete_conversation(self, owner: Principal, conversation_id: str) -> list[str] | None:
        """Delete a conversation and its interactions; their ids, or None if unknown."""

    @abc.abstractmethod
    async def add_interaction(self, interaction: Interaction) -> bool:
        """Store it and move its conversation's ``updated_time``; False if the conversation is unknown."""

    @abc.abstractmethod
    async def get_interaction(self, owner: Principal, interaction_id: str) -> Interaction | None: ...

    async def current_interactions(self, interactions: Sequence[Interaction]) -> list[Interaction | None]:
        """Each interaction as stored now (None once gone): what a shared outbox's reader re-checks."""
        return [await self.get_interaction(i.owner, i.interaction_id) for i in interactions]

    @abc.abstractmethod
    async def list_interactions(
        self, owner: Principal, conversation_id: str, offset: int, limit: int, newest_first: bool
    ) -> list[Interaction] | None:
        """Interactions that are not traces, by ``create_time``; None if the conversation is unknown."""

    async def messages_version(self, conversation_id: str) -> int | None:
        """A number that changes, before any write is acknowledged, whenever ``list_interactions``
        of this conversation could answer differently; None when the store cannot tell, so that
        nothing may cache its pages.  A store that other processes write answers from what they share."""
        return None

    @abc.abstractmethod
    async def list_traces(
        self, owner: Principal, interaction_id: str, offset: int, limit: int
    ) -> list[Interaction] | None:
        """An interaction's traces by ``trace_number``; None if the interaction is unknown."""

    @abc.abstractmethod
    async def update_interaction(
        self, owner: Principal, interaction_id: str, changes: Mapping[str, Any]
    ) -> Updated[Interaction] | None:
        """Merge ``changes`` in as a partial document update does; None if unknown."""

    @abc.abstractmethod
    async def erase_user(self, owner: Principal) -> tuple[int, int]:
        """Delete every memory and message (traces included) ``owner`` has; ``(memories, messages)`` removed."""

    @abc.abstractmethod
    async def search_conversations(self, owner: Principal, body: Mapping[str, Any] | None) -> dict[str, Any]:
        """A 2.12+ ``_search`` body run over the owner's memories: OpenSearch's search response.

        Nothing beyond the owner can match; a bad body raises the typed 400 OpenSearch would answer.
        """

    @abc.abstractmethod
    async def search_interactions(
        self, owner: Principal, conversation_id: str, body: Mapping[str, Any] | None
    ) -> dict[str, Any]:
        """A 2.12+ ``_search`` body run over the owner's messages of one memory, traces included.

        An unknown (or another owner's) memory has no messages; saying 404 is the caller's business.
        """

    # -- the history bridge's outbox ------------------------------------------------------

    @abc.abstractmethod
    async def outbox_pending(self, limit: int, now: float) -> list[OutboxEntry]:
        """Up to ``limit`` entries due at ``now`` (not backing off), oldest first, now held by this process:
        where processes share the outbox, each is claimed with a lease and those another holds are passed by."""

    @abc.abstractmethod
    async def outbox_done(self, entries: Sequence[OutboxEntry]) -> None:
        """Drop entries whose work is durable elsewhere; entries written since stay, and so do entries whose
        lease another process has taken over (theirs to finish)."""

    @abc.abstractmethod
    async def outbox_retry(self, entries: Sequence[OutboxEntry], not_before: float) -> None:
        """Count a failed attempt on each entry we still hold, hold it back until ``not_before``, release it."""

    @abc.abstractmethod
    async def outbox_lag(self) -> OutboxLag: ...

    async def health(self) -> dict[str, Any]:
        return {"status": "green"}


SearchDocument = tuple[str, dict[str, Any], int]
"""``(id, ml-commons document, version)``."""


def memory_search(body: Mapping[str, Any] | None, fields: Fields, index: str) -> SearchBody:
    """A search body as ml-commons runs it on its own index.

    It puts the caller's query inside its own ``bool`` (a body without one is
    its 400), and always fetches the whole ``_source`` unless fields are named.
    """
    try:
        query = parse_search(body, fields=fields)
    except ShardFailure as failure:
        failure.index = index
        raise
    if isinstance(body, Mapping) and body.get("query") is None:
        raise InvalidArgument("inner bool query clause cannot be null")
    if not query.source.enabled:
        query = replace(query, source=SourceFilter())
    return query


async def evaluate_search(
    body: Mapping[str, Any] | None,
    index: str,
    documents: Callable[[], Awaitable[list[SearchDocument]]],
    memory_id: str | None = None,
) -> dict[str, Any]:
    """``body`` parsed, then evaluated in Python over ``documents`` (the owner's, as ml-commons stores them).

    For stores that cannot run the query DSL themselves.  Evaluation runs off the loop and
    within budget; ties keep the given order, so pass the documents oldest first.  A message
    search names its ``memory_id``: ml-commons adds it beside the caller's query as a scored clause.
    """
    query = memory_search(body, MESSAGE_FIELDS if index == MESSAGE_INDEX else META_FIELDS, index)
    if memory_id is not None:
        query = replace(query, query=Bool(must=[query.query, TermScore("memory_id", KEYWORD, memory_id)]))
    started = time.perf_counter()
    loaded = await documents()
    results = await bounded(lambda budget: execute(query, loaded, budget=budget))
    return search_response(results, int((time.perf_counter() - started) * 1000), index=index)


def conversation_documents(conversations: Iterable[Conversation]) -> list[SearchDocument]:
    """Memories as documents in Lucene's doc order, which equal scores keep: a write re-indexes a
    document at the end, and every write to a memory (a message too) moves its ``updated_time``,
    so the least recently written comes first (as the real node answers, issue 25)."""
    ordered = sorted(conversations, key=lambda c: c.updated_time)
    return [(c.conversation_id, memory_source(c), c.version) for c in ordered]


def interaction_documents(interactions: Iterable[Interaction]) -> list[SearchDocument]:
    """Messages as documents, oldest first."""
    ordered = sorted(interactions, key=lambda i: i.create_time)
    return [(i.interaction_id, message_source(i), i.version) for i in ordered]
