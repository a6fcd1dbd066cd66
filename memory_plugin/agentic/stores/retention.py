"""What retention needs from a store: every container, a type's docs as read, and deletes conditional on them.

A sweep reads, decides, then deletes; between the read and the delete a writer
may touch a session or update a memory.  Every delete here is conditional on the
version the sweep read (SQLite: the row's version; OpenSearch: ``if_seq_no`` and
``if_primary_term``), so a doc changed since is kept, and a doc already gone
(another process's sweep, a user's delete) counts nothing: sweeps in many
processes at once delete each doc once and nothing they did not decide on.

A run covers every doc of a container, whoever wrote it (its owner, a role
holder, the organisation's key, a SigV4 agent): ml-commons' retention job
filters by ``memory_container_id`` and ``pinned`` only.  The organisation still
scopes every read and delete, so no run reaches another organisation's docs.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from memory_plugin.agentic.stores.base import StoredDoc
from memory_plugin.auth import Principal


@dataclass(frozen=True)
class Snapshot:
    """A doc as the sweep read it; ``token`` is the version a delete is conditional on."""

    id: str
    source: dict[str, Any]
    token: Any = field(compare=False)


class RetentionStore(abc.ABC):
    @abc.abstractmethod
    async def every_container(self) -> list[tuple[Principal, StoredDoc]]:
        """Every container of every owner, with its owner (the background sweep's list)."""

    @abc.abstractmethod
    async def snapshot(self, organization_id: str, container_id: str, memory_type: str) -> list[Snapshot]:
        """Every doc of a type in the organisation's container, whoever wrote it, with its version."""

    @abc.abstractmethod
    async def delete_unchanged(
        self, organization_id: str, container_id: str, memory_type: str, docs: Sequence[Snapshot]
    ) -> list[str]:
        """Delete those of ``docs`` still at the version read; the ids this call deleted."""
