"""One interface for the ml documents (connectors, models, model groups, tasks), private to their owner.

Every call names the owner: a document of another owner is as absent as one
that never existed.  Writes are compare-and-set on the version a reader saw,
so that two processes updating one model cannot both win.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import Any, Literal

from memory_plugin.auth import Principal
from memory_plugin.ml.budget import Budget, CallBudget

#: ``rate_limit``: a rate-limited model's token bucket, shared by every process of the deployment.
Kind = Literal["connector", "model", "model_group", "task", "rate_limit"]
KINDS: tuple[Kind, ...] = ("connector", "model", "model_group", "task", "rate_limit")


@dataclass(frozen=True)
class Stored:
    id: str
    source: dict[str, Any]
    #: Moves on every write; ``replace`` succeeds only at the version it was read at.
    version: int


@dataclass(frozen=True)
class Owned:
    """A document with the principal it belongs to: model groups are shared within an organisation, and a
    write to one goes through its owner (``replace`` and ``delete`` name the owner)."""

    owner: Principal
    stored: Stored


class MLStore(abc.ABC):
    @abc.abstractmethod
    async def open(self) -> None: ...

    @abc.abstractmethod
    async def close(self) -> None: ...

    def call_budget(self, per_minute: int, concurrent: int, call_seconds: float) -> Budget:
        """Where the organisations' remote calls are counted: in this process, for a store only one process
        uses (the embedded default holds its data folder locked).  ``call_seconds``: the longest a call takes."""
        return CallBudget(per_minute, concurrent)

    @abc.abstractmethod
    async def master_key(self, proposed: bytes) -> bytes:
        """The deployment's credential key: ``proposed`` if none was kept yet, else the kept one (create-only)."""

    @abc.abstractmethod
    async def create(self, kind: Kind, owner: Principal, doc_id: str, source: dict[str, Any]) -> None: ...

    @abc.abstractmethod
    async def get(self, kind: Kind, owner: Principal, doc_id: str) -> Stored | None: ...

    @abc.abstractmethod
    async def replace(self, kind: Kind, owner: Principal, current: Stored, source: dict[str, Any]) -> bool:
        """Write ``source`` if the document is still at ``current.version``; False if another write came first."""

    @abc.abstractmethod
    async def delete(self, kind: Kind, owner: Principal, doc_id: str) -> bool: ...

    @abc.abstractmethod
    async def all(self, kind: Kind, owner: Principal) -> list[Stored]:
        """The owner's documents of ``kind``, least recently written first (an unmerged Lucene index's order)."""

    @abc.abstractmethod
    async def find(self, kind: Kind, organization_id: str, doc_id: str) -> Owned | None:
        """The document ``doc_id`` of any owner in the organisation; None if absent or another organisation's."""

    @abc.abstractmethod
    async def organization(self, kind: Kind, organization_id: str) -> list[Owned]:
        """Every owner's documents of ``kind`` in the organisation, least recently written first."""

    @abc.abstractmethod
    async def erase(self, owner: Principal) -> int:
        """Delete everything ``owner`` keeps here (a user's erasure); how many documents went."""


class StoreConflict(Exception):
    """A create found the id taken."""
