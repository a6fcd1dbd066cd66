"""Memory containers: create, read, update, delete and search them.

A container is its owner's, and usable too by the keys of its organisation that hold one of its
``backend_roles`` and by the organisation's own key (``stores.base.may_use``); only the owner and the
organisation's key delete it.  Anyone else finds no such container (404).
"""

from __future__ import annotations

import time
from typing import Any

from memory_plugin.agentic.container_requests import (
    ContainerDeletion,
    ContainerInput,
    ContainerUpdate,
    updated_container,
)
from memory_plugin.agentic.llm import ContainerModels
from memory_plugin.agentic.models import CONTAINER_INDEX, WORKING, Container, index_name
from memory_plugin.agentic.results import ContainerCreated, Hits, Written
from memory_plugin.agentic.retention_settings import RetentionDefaults
from memory_plugin.agentic.stores.base import StoredDoc, owner_id
from memory_plugin.agentic.stores.containers import ContainerStore
from memory_plugin.agentic.views import container_view, took
from memory_plugin.auth import Principal
from memory_plugin.clock import new_id
from memory_plugin.dsl import SearchBody, bounded, execute
from memory_plugin.errors import Conflict, StatusForbidden, StatusNotFound


def found_container(stored: StoredDoc | None) -> StoredDoc:
    """The container a store call found; a 404 in ml-commons' words when it is absent or not the caller's."""
    if stored is None:
        raise StatusNotFound("Memory container not found")
    return stored


class Containers:
    def __init__(
        self,
        store: ContainerStore,
        models: ContainerModels,
        *,
        retention_enabled: bool,
        retention_defaults: RetentionDefaults | None = None,
    ) -> None:
        self.store = store
        self.models = models
        self.retention_enabled = retention_enabled
        self.retention_defaults = retention_defaults or RetentionDefaults()

    async def load(self, owner: Principal, container_id: str) -> Container:
        """The container, which every memory call reads first (a 404 when the caller may not use it)."""
        stored = found_container(await self.store.get_container(owner, container_id))
        return Container(stored.id, stored.source, stored.owner)

    async def create(self, owner: Principal, request: ContainerInput) -> ContainerCreated:
        model_id = request.embedding.model_id if request.embedding is not None else None
        dimension = await self.models.dimension(owner, model_id)
        doc = request.document(dimension, owner_id(owner), owner.backend_roles)
        if self.retention_enabled:
            self.retention_defaults.apply_on_create(doc["configuration"])
        if request.custom_id is not None:
            if await self.store.insert_container(owner, request.custom_id, doc) is None:
                raise Conflict(f"memory container id '{request.custom_id}' already exists")
            return ContainerCreated(request.custom_id)
        while True:
            container_id = new_id()
            if await self.store.insert_container(owner, container_id, doc) is not None:
                return ContainerCreated(container_id)

    async def get(self, owner: Principal, container_id: str) -> Container:
        stored = await self.store.get_container(owner, container_id)
        if stored is None:
            raise StatusNotFound(
                f"Failed to find memory container with the provided memory container id: {container_id}"
            )
        return Container(stored.id, stored.source, stored.owner)

    async def update(self, owner: Principal, container_id: str, update: ContainerUpdate) -> Written:
        current = await self.load(owner, container_id)
        dimension = await self.models.dimension(current.owner or owner, update.embedding_model_id)

        def merge(source: dict[str, Any]) -> dict[str, Any]:
            """Into the container as the store holds it at the write, so that concurrent updates all count."""
            return updated_container(source, update, dimension)

        stored = found_container(await self.store.update_container(owner, container_id, merge))
        return Written(CONTAINER_INDEX, stored, "updated", forced_refresh=False)

    async def delete(self, owner: Principal, container_id: str, request: ContainerDeletion) -> Written:
        container = await self.load(owner, container_id)
        if container.owner is not None and container.owner != owner:
            if not owner.organization_admin:  # a role holder: ml-commons' words and status
                raise StatusForbidden("Only container owner can delete container")
            owner = container.owner  # the organisation's key deletes it as its owner would
        if request.delete_all_memories or request.delete_memories:
            config = container.config
            sharing = [
                other
                for other in await self.store.containers(owner)
                if other.id != container_id and index_name(other.source, WORKING) == container.index(WORKING)
            ]
            if sharing:
                raise Conflict(
                    "Cannot delete memory indices as multiple containers share the index prefix "
                    f"'{config.get('index_prefix')}'. Delete the memories of this container by query instead, "
                    "or delete the container without delete_all_memories or delete_memories."
                )
        # The container's memories go with it: no path could reach them afterwards.
        stored = found_container(await self.store.delete_container(owner, container_id))
        return Written(CONTAINER_INDEX, stored, "deleted")

    async def erase_user(self, organization_id: str, user_id: str) -> int:
        """Delete a user's containers in one organisation, every memory in them included: how many went."""
        owner, erased = Principal(organization_id, user_id), 0
        for container in await self.store.containers(owner):
            erased += await self.store.delete_container(owner, container.id) is not None
        return erased

    async def search(self, owner: Principal, query: SearchBody) -> Hits:
        started = time.perf_counter()
        containers = await self.store.usable_containers(owner)
        rows = [(c.id, container_view(c.source)) for c in containers]
        result = await bounded(lambda budget: execute(query, rows, budget=budget))
        return Hits(CONTAINER_INDEX, result, took(started), containers)
