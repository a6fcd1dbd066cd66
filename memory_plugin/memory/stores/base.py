"""Where conversations and interactions live: the interface the memory service needs.

``stores/sqlite.py`` is the embedded default and ``stores/opensearch.py`` keeps
them in an OpenSearch cluster.  Every read and write names its owner, and a
row of another owner is treated as if it did not exist.
"""

from __future__ import annotations

import abc
import asyncio
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from memory_plugin.auth import Principal
from memory_plugin.memory.dsl import DocumentResults, SearchBody, execute
from memory_plugin.memory.models import Conversation, Interaction, Updated
from memory_plugin.memory.views import memory_source, message_source


class MemoryStore(abc.ABC):
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

    @abc.abstractmethod
    async def list_interactions(
        self, owner: Principal, conversation_id: str, offset: int, limit: int, newest_first: bool
    ) -> list[Interaction] | None:
        """Interactions that are not traces, by ``create_time``; None if the conversation is unknown."""

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
    async def search_conversations(self, owner: Principal, query: SearchBody) -> DocumentResults:
        """Run a 2.12+ ``_search`` over the owner's memories; nothing beyond the owner can match."""

    @abc.abstractmethod
    async def search_interactions(self, owner: Principal, conversation_id: str, query: SearchBody) -> DocumentResults:
        """Run a 2.12+ ``_search`` over the owner's messages of one memory, traces included."""

    async def health(self) -> dict[str, Any]:
        return {"status": "green"}


#: Seconds one ``_search`` may spend evaluating its query before it answers ``timed_out``.
EVALUATION_BUDGET_SECONDS = 2.0
#: Query evaluation runs here, never on the event loop; two threads bound how
#: much CPU (and GIL) concurrent searches can take from everything else.
_EVALUATION = ThreadPoolExecutor(max_workers=2, thread_name_prefix="dsl")


async def _evaluate(
    query: SearchBody, documents: Callable[[], list[tuple[str, dict[str, Any], int]]]
) -> DocumentResults:
    budget = EVALUATION_BUDGET_SECONDS
    return await asyncio.get_running_loop().run_in_executor(
        _EVALUATION, lambda: execute(query, documents(), budget=budget)
    )


async def evaluate_conversations(query: SearchBody, conversations: Iterable[Conversation]) -> DocumentResults:
    """``query`` evaluated over ``conversations``, as ml-commons' stored documents, off the loop and within budget.

    Ties keep the given order, so pass them oldest first (insertion order).
    """
    ordered = sorted(conversations, key=lambda c: c.create_time)
    return await _evaluate(query, lambda: [(c.conversation_id, memory_source(c), c.version) for c in ordered])


async def evaluate_interactions(query: SearchBody, interactions: Iterable[Interaction]) -> DocumentResults:
    """``query`` evaluated over ``interactions`` (oldest first), as ml-commons' stored documents."""
    ordered = sorted(interactions, key=lambda i: i.create_time)
    return await _evaluate(query, lambda: [(i.interaction_id, message_source(i), i.version) for i in ordered])
