"""What a store does with memory containers: the capability ``containers`` and ``retention_service`` use.

Every call names its owner (``base``): a container of anyone else is absent,
except where ``may_use`` lets a role holder or the organisation's key in.
"""

from __future__ import annotations

import abc
from typing import Any

from memory_plugin.agentic.stores.base import Merge, StoredDoc
from memory_plugin.auth import Principal


class ContainerStore(abc.ABC):
    @abc.abstractmethod
    async def insert_container(self, owner: Principal, container_id: str, doc: dict[str, Any]) -> StoredDoc | None:
        """None when the id is taken."""

    @abc.abstractmethod
    async def get_container(self, owner: Principal, container_id: str) -> StoredDoc | None:
        """The container if ``owner`` may use it (``may_use``), with its ``owner`` set."""

    @abc.abstractmethod
    async def find_container(self, organization_id: str, container_id: str) -> StoredDoc | None:
        """The organisation's container, whoever owns it: for background work, whose access was checked when
        it was queued, and for a write's check that the container still exists."""

    @abc.abstractmethod
    async def update_container(self, owner: Principal, container_id: str, merge: Merge) -> StoredDoc | None:
        """Merge an update into a container ``owner`` may use (it keeps its owner), as stored when it is
        written: a concurrent update is never lost (``Merge``)."""

    @abc.abstractmethod
    async def delete_container(self, owner: Principal, container_id: str) -> StoredDoc | None:
        """Delete the container with all its memories and pending work."""

    @abc.abstractmethod
    async def containers(self, owner: Principal) -> list[StoredDoc]:
        """The containers ``owner`` owns."""

    @abc.abstractmethod
    async def usable_containers(self, caller: Principal) -> list[StoredDoc]:
        """Every container ``caller`` may use (``may_use``), selected by the store's own query."""
