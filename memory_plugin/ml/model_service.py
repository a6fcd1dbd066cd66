"""ml-commons' models: register (into a model group), get, deploy, undeploy, delete and search.

Register and deploy finish before they answer (a remote model has nothing to load, the built-in one is
loaded already), so their tasks are ``COMPLETED`` when the caller reads them.
"""

from __future__ import annotations

from typing import Any

from memory_plugin.auth import Principal
from memory_plugin.clock import new_id
from memory_plugin.dsl import SearchBody
from memory_plugin.errors import InvalidArgument, StatusBadRequest, StatusNotFound
from memory_plugin.ml.config import Embeddings, MLSettings, now_millis
from memory_plugin.ml.connector_service import Connectors
from memory_plugin.ml.documents import replace, search_kind
from memory_plugin.ml.guards import RateLimiters
from memory_plugin.ml.model_groups import ModelGroups
from memory_plugin.ml.model_requests import ModelUpdateInput, RegisterInput, UndeployInput
from memory_plugin.ml.model_update import update_model
from memory_plugin.ml.results import Found, ModelDeployed, ModelDoc, ModelRegistered, Undeployed, WriteResult
from memory_plugin.ml.stores.base import MLStore, Stored
from memory_plugin.ml.task_service import Tasks
from memory_plugin.ml.views import MODEL_INDEX, WRITES, api_version, model_search_view

#: Models one ``_undeploy`` call may name.
MAX_BULK_UNDEPLOY = 1000


class Models:
    def __init__(
        self,
        store: MLStore,
        embedder: Embeddings,
        settings: MLSettings,
        node_id: str,
        *,
        connectors: Connectors,
        groups: ModelGroups,
        tasks: Tasks,
        rate_limiters: RateLimiters,
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.settings = settings
        self.node_id = node_id
        self.connectors = connectors
        self.groups = groups
        self.tasks = tasks
        self.rate_limiters = rate_limiters

    async def register(self, owner: Principal, found: RegisterInput) -> ModelRegistered:
        source = await self._model_source(owner, found)
        group_id, version = await self._model_group(owner, found)
        model_id = new_id()
        now = now_millis()
        source.update({"model_group_id": group_id, "model_version": version, "created_time": now})
        source["last_updated_time"] = now
        source["model_state"] = "REGISTERED"
        source["is_hidden"] = False
        await self.store.create("model", owner, model_id, source)
        task_id = await self.tasks.record(owner, model_id, "REGISTER_MODEL", source["algorithm"])
        if found.deploy:
            await self.deploy(owner, model_id)
        return ModelRegistered(task_id, model_id)

    async def _model_source(self, owner: Principal, found: RegisterInput) -> dict[str, Any]:
        if found.function_name != "REMOTE":
            if found.name not in self.settings.built_in_names:
                raise InvalidArgument(
                    f"model [{found.name}] is not available here: this server runs no model it cannot load, "
                    f"and its built-in text embedding model registers as one of {list(self.settings.built_in_names)}",
                    parameter="name",
                )
            if found.guardrails is not None:  # ml-commons runs guardrails in remote calls only
                raise InvalidArgument("guardrails apply to remote models only", parameter="guardrails")
            local: dict[str, Any] = {
                "name": found.name,
                "algorithm": "TEXT_EMBEDDING",
                "model_format": found.model_format or "ONNX",
                "model_config": {
                    "model_type": "bert",
                    "embedding_dimension": self.embedder.dimension,
                    "framework_type": "sentence_transformers",
                },
            }
            if found.rate_limiter is not None:
                local["rate_limiter"] = found.rate_limiter
            if found.description is not None:  # ml-commons leaves an absent field out, never null
                local["description"] = found.description
            return local
        source: dict[str, Any] = {"name": found.name, "algorithm": "REMOTE"}
        if found.description is not None:
            source["description"] = found.description
        if found.rate_limiter is not None:
            source["rate_limiter"] = found.rate_limiter
        if found.guardrails is not None:
            source["guardrails"] = found.guardrails
        if found.connector is not None:
            model_key = new_id()
            inline = self.connectors.source(owner, model_key, found.connector)
            inline.pop("created_time", None)
            inline.pop("last_updated_time", None)
            inline["sealed_for"] = model_key  # the credential's context: the model's own key
            source["connector"] = inline
        elif found.connector_id is not None:
            if await self.store.get("connector", owner, found.connector_id) is None:
                raise StatusNotFound(f"Failed to find connector:{found.connector_id}")
            source["connector_id"] = found.connector_id
        else:
            raise InvalidArgument(
                "You must provide connector content when creating a remote model without connector id!",
                parameter="connector",
            )
        return source

    async def _model_group(self, owner: Principal, found: RegisterInput) -> tuple[str, str]:
        """The group a new model joins, and its version there: the named group (if the caller may use it),
        else the caller's group of the model's name (or one of that name it may use), else a new one."""
        group_id = found.model_group_id or None  # ml-commons: an empty id is none (``StringUtils.isEmpty``)
        group = (
            await self.groups.usable(owner, group_id, "Model group not found")
            if group_id is not None
            else await self.groups.own_or_usable_named(owner, found.name)
        )
        if group is None:
            return await self.groups.create_for_model(owner, found.name), "1"
        return group.stored.id, await self.groups.next_version(group)

    async def stored(self, owner: Principal, model_id: str, missing: str | None = None) -> Stored:
        stored = await self.store.get("model", owner, model_id)
        if stored is None:
            raise StatusNotFound(missing or f"Failed to find model with the provided model id: {model_id}")
        return stored

    async def get(self, owner: Principal, model_id: str) -> ModelDoc:
        return ModelDoc.of((await self.stored(owner, model_id)).source)

    async def update(self, owner: Principal, model_id: str, update: ModelUpdateInput) -> WriteResult:
        return await update_model(self.store, self.groups, owner, model_id, update)

    async def deploy(self, owner: Principal, model_id: str) -> ModelDeployed:
        stored = await self.stored(owner, model_id, "Failed to find model")
        await self.mark_deployed(owner, stored)
        return ModelDeployed(
            await self.tasks.record(owner, model_id, "DEPLOY_MODEL", stored.source["algorithm"], is_async=True)
        )

    async def mark_deployed(self, owner: Principal, stored: Stored, *, lenient: bool = False) -> None:
        """Mark a model deployed: a remote one has nothing to load.  Counted as ml-commons writes it
        (``DEPLOYING``, then ``DEPLOYED``), so that ``_version`` reads the same."""
        now = now_millis()
        deployed = {
            **stored.source,
            "model_state": "DEPLOYED",
            "last_updated_time": now,
            "last_deployed_time": now,
            "auto_redeploy_retry_times": 0,
            "planning_worker_node_count": 1,
            "current_worker_node_count": 1,
            "planning_worker_nodes": [self.node_id],
            "deploy_to_all_nodes": True,
            WRITES: stored.source.get(WRITES, 0) + 2,
        }
        if lenient:  # concurrent first calls all deploy it: one write wins, and the model is deployed either way
            await self.store.replace("model", owner, stored, deployed)
        else:
            await replace(self.store, "model", owner, stored, deployed)

    async def undeploy(self, owner: Principal, model_id: str) -> Undeployed:
        stored = await self.stored(owner, model_id, "Failed to find model")
        return Undeployed(self.node_id, {model_id: await self._undeployed(owner, stored)})

    async def _undeployed(self, owner: Principal, stored: Stored) -> str:
        if stored.source.get("model_state") != "DEPLOYED":
            return "not_found"
        undeployed = {
            **stored.source,
            "model_state": "UNDEPLOYED",
            "last_updated_time": now_millis(),
            "planning_worker_node_count": 0,
            "current_worker_node_count": 0,
            "planning_worker_nodes": [],
            WRITES: stored.source.get(WRITES, 0) + 1,
        }
        await replace(self.store, "model", owner, stored, undeployed)
        return "undeployed"

    async def undeploy_many(self, owner: Principal, found: UndeployInput) -> Undeployed:
        """``POST /models/_undeploy`` with ``model_ids``: each of the owner's models, as one undeploy does."""
        ids = found.model_ids
        if ids is None:
            ids = tuple(m.id for m in await self.store.all("model", owner) if m.source.get("model_state") == "DEPLOYED")
        stats: dict[str, str] = {}
        for model_id in ids[:MAX_BULK_UNDEPLOY]:
            stored = await self.store.get("model", owner, model_id)
            if stored is None:
                stats[model_id] = "not_found"
                continue
            stats[model_id] = await self._undeployed(owner, stored)
        return Undeployed(self.node_id, stats)

    async def delete(self, owner: Principal, model_id: str) -> WriteResult:
        stored = await self.stored(owner, model_id)
        if stored.source.get("model_state") in ("DEPLOYED", "DEPLOYING", "PARTIALLY_DEPLOYED"):
            raise StatusBadRequest(
                "Model cannot be deleted in deploying or deployed state. Try undeploy model first then delete"
            )
        deleted = await self.store.delete("model", owner, model_id)
        await self.rate_limiters.forget(owner, model_id)
        return WriteResult(MODEL_INDEX, model_id, api_version(stored), "deleted" if deleted else "not_found", True)

    async def search(self, owner: Principal, query: SearchBody) -> Found:
        return await search_kind(self.store, owner, "model", query, MODEL_INDEX, model_search_view)
