"""Erasing a user: their records in every region, their conversational memory, their agentic memory
containers and their ml models and connectors, so that nothing personal is left behind in any API.

Knows no HTTP.  It sits above the three APIs, which know nothing of one another, and asks each to
erase its own part.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from memory_plugin.auth import Principal
from memory_plugin.histories.service import HistoryService
from memory_plugin.histories.stores.filters import Filter


class MemoryEraser(Protocol):
    """Erases a user's conversational memory (the memory service)."""

    async def erase_user(self, organization_id: str, user_id: str) -> tuple[int, int]:
        """``(memories, messages)`` removed."""
        ...


class Forgotten(Protocol):
    """What forgetting removed from the organisation's shared containers (``agentic.stores.sources``)."""

    def as_dict(self) -> dict[str, Any]: ...


class ContainerEraser(Protocol):
    """Erases a user's agentic memory containers, with every memory in them (the agentic service)."""

    async def erase_user(self, organization_id: str, user_id: str) -> int:
        """Containers removed."""
        ...

    async def forget_user(self, organization_id: str, user_id: str) -> Forgotten:
        """In the organisation-wide containers: what is filed under the user's ``namespace.user_id``, and what
        was inferred from it."""
        ...


class ModelEraser(Protocol):
    """Erases a user's connectors, models, model groups and tasks (the ml service)."""

    async def erase_user(self, organization_id: str, user_id: str) -> int:
        """Documents removed."""
        ...


@dataclass(frozen=True)
class Erasure:
    """What a filtered deletion removed: records and chunks, and for a user erasure their memory too."""

    records: int
    chunks: int
    memories: int = 0
    messages: int = 0
    memory_containers: int = 0
    ml_documents: int = 0
    #: The erasure report of agentic memory in the organisation's shared containers, by id (what was found).
    agentic_forgotten: dict[str, Any] = field(default_factory=dict)


def erased_users(principal: Principal, where: Filter) -> list[str]:
    """The users a filter erases whole: it holds only ``user_id`` eq/in conditions (a user's key: only itself)."""
    if not all(c.field == "user_id" and c.op in ("eq", "in") for c in where.conditions):
        return []
    users = set.intersection(*(set(map(str, c.values)) for c in where.conditions))
    if principal.user_id is not None:
        users &= {principal.user_id}
    return sorted(users)


class ErasureService:
    """Deletes records by filter through the histories service, then erases each user it names whole."""

    def __init__(
        self, histories: HistoryService, memory: MemoryEraser, containers: ContainerEraser, models: ModelEraser
    ) -> None:
        self.histories = histories
        self.memory = memory
        self.containers = containers
        self.models = models

    async def delete_matching(self, principal: Principal, where: Filter) -> Erasure:
        """Delete the organisation's records matching ``where`` (a user's key: only its own).

        A filter on ``user_id`` alone is the erasure of those users: their
        conversational memory goes too (memories, messages, traces), their
        agentic memory containers with everything in them, and their ml
        models and connectors.  The records go first: a region that cannot
        answer stops the erasure before anything else is touched.
        """
        deleted = await self.histories.delete_matching(principal, where)
        organization_id = principal.organization_id
        memories = messages = containers = ml_documents = 0
        forgotten: dict[str, Any] = {}
        for user_id in erased_users(principal, where):
            erased_memories, erased_messages = await self.memory.erase_user(organization_id, user_id)
            memories, messages = memories + erased_memories, messages + erased_messages
            containers += await self.containers.erase_user(organization_id, user_id)
            for name, value in (await self.containers.forget_user(organization_id, user_id)).as_dict().items():
                if value:
                    forgotten[name] = forgotten.get(name, 0 if isinstance(value, int) else []) + value
            ml_documents += await self.models.erase_user(organization_id, user_id)
        return Erasure(
            records=deleted.records,
            chunks=deleted.chunks,
            memories=memories,
            messages=messages,
            memory_containers=containers,
            ml_documents=ml_documents,
            agentic_forgotten=forgotten,
        )
