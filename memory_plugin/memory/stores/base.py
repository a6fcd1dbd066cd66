"""Where conversations and interactions live: the interface the memory service needs.

``stores/sqlite.py`` is the embedded default and ``stores/opensearch.py`` keeps
them in an OpenSearch cluster.  Every read and write names its owner, and a
row of another owner is treated as if it did not exist.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping
from typing import Any

from memory_plugin.auth import Principal
from memory_plugin.memory.models import Conversation, Interaction


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
    ) -> Conversation | None: ...

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
    ) -> Interaction | None: ...

    @abc.abstractmethod
    async def all_conversations(self, owner: Principal) -> list[Conversation]:
        """Every conversation of the owner, for query evaluation."""

    @abc.abstractmethod
    async def all_interactions(self, owner: Principal, conversation_id: str | None = None) -> list[Interaction]:
        """Every interaction of the owner (of one conversation, if named), traces included."""

    async def health(self) -> dict[str, Any]:
        return {"status": "green"}
