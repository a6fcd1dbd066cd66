"""What a store does with the memories of a container, of any of the four types: the capability ``memories``
uses (and ``search``, ``infer`` and ``forgetting`` for their reads and deletes).

Every call is scoped to owner and container (``base``); a long-term doc whose
text changes is embedded again (``text_changed``), through the embedding queue.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from typing import Any

from memory_plugin.agentic.stores.base import ExactTerms, MemoryAdd, Merge, StoredDoc
from memory_plugin.auth import Principal


class MemoryDocStore(abc.ABC):
    @abc.abstractmethod
    async def add_memory(self, owner: Principal, container_id: str, add: MemoryAdd) -> bool:
        """The working doc, its session and its infer job, in one transaction; False, and nothing written, when
        the owner's container is gone (deleted since the caller read it: its memories would be unreachable)."""

    @abc.abstractmethod
    async def create_session(
        self, owner: Principal, container_id: str, session_id: str, doc: dict[str, Any]
    ) -> bool | None:
        """False when the session id exists already; None, and nothing written, when the container is gone."""

    @abc.abstractmethod
    async def get(self, owner: Principal, container_id: str, memory_type: str, memory_id: str) -> StoredDoc | None: ...

    @abc.abstractmethod
    async def sources(
        self, owner: Principal, container_id: str, memory_type: str, memory_id: str
    ) -> list[dict[str, Any]] | None:
        """The hidden ``memory_sources`` of a long-term or history doc (``[]`` when it has none), None when the
        doc is not found: what the console shows as the working memories a fact came from."""

    @abc.abstractmethod
    async def update(
        self, owner: Principal, container_id: str, memory_type: str, memory_id: str, merge: Merge
    ) -> StoredDoc | None:
        """Merge an update into a doc as stored when it is written, so that a concurrent update is never lost
        (``Merge``); a long-term one whose text changed is embedded again."""

    async def replace(
        self, owner: Principal, container_id: str, memory_type: str, memory_id: str, doc: dict[str, Any]
    ) -> StoredDoc | None:
        """Re-index a doc whole (its hidden fields kept)."""
        return await self.update(owner, container_id, memory_type, memory_id, lambda _current: doc)

    @abc.abstractmethod
    async def delete(
        self, owner: Principal, container_id: str, memory_type: str, memory_id: str
    ) -> StoredDoc | None: ...

    @abc.abstractmethod
    async def docs(self, owner: Principal, container_id: str, memory_type: str) -> list[StoredDoc]:
        """Every doc of a type in the container, oldest first (for query evaluation)."""

    def indexed_field(self, path: str) -> bool:
        """Whether ``docs_matching`` can select by exact values of ``path``."""
        return False

    async def docs_matching(
        self,
        owner: Principal,
        container_id: str,
        memory_type: str,
        required: ExactTerms,
    ) -> list[StoredDoc]:
        """The docs of ``docs`` that may hold, for each ``(paths, values)``, one of the string ``values`` at one of
        the ``paths`` (each path ``indexed_field``): a superset of them, oldest first, for query evaluation to
        decide.  By default every doc (a store without postings scans)."""
        return await self.docs(owner, container_id, memory_type)

    async def sorted_page(
        self,
        owner: Principal,
        container_id: str,
        memory_type: str,
        required: ExactTerms,
        sort: tuple[str, bool, int],
        count_up_to: int | None = None,
    ) -> tuple[int, list[StoredDoc]] | None:
        """How many docs ``docs_matching`` selects, when it selects exactly the matches, and the first ``limit``
        by a top-level field (``sort``: field, descending, limit; oldest first among equals), oldest first.
        The count may stop at ``count_up_to`` (None: all; ``dsl.pushdown.count_up_to``).  None when the store
        cannot tell (a store without postings, a doc without a single number there)."""
        return None

    @abc.abstractmethod
    async def delete_ids(self, owner: Principal, container_id: str, memory_type: str, ids: Sequence[str]) -> int: ...

    @abc.abstractmethod
    async def embeddings(self, owner: Principal, container_id: str, ids: Sequence[str]) -> dict[str, list[float]]:
        """``memory_embedding`` of long-term docs, for the answers that show it."""
