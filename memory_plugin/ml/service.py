"""Connectors, models, model groups, tasks and predict, as ml-commons 2.19 answers them: one service per
resource (``connectors``, ``models``, ``groups``, ``tasks``, ``predictions``) over one ml store.

Everything here belongs to its owner: another caller's connector or model is as absent as one that never
existed (404), and a user's erasure removes all of it.  Each service takes the typed input its route parsed
and answers a typed result (``results``) that ``views`` renders.
"""

from __future__ import annotations

import hashlib

from memory_plugin.auth import Principal
from memory_plugin.ml.chat import RemoteChat, RemoteEmbedding
from memory_plugin.ml.config import Embeddings, MLSettings
from memory_plugin.ml.connector_service import Connectors
from memory_plugin.ml.guards import RateLimiters
from memory_plugin.ml.metrics import MLMetrics
from memory_plugin.ml.model_groups import ModelGroups
from memory_plugin.ml.model_service import Models
from memory_plugin.ml.predict_service import BUILT_IN, Predict
from memory_plugin.ml.remote import RemoteCaller
from memory_plugin.ml.secrets import SecretBox, new_master_key
from memory_plugin.ml.stores.base import MLStore
from memory_plugin.ml.task_service import Tasks

__all__ = ["BUILT_IN", "MLService"]


class MLService:
    def __init__(
        self,
        store: MLStore,
        embedder: Embeddings,
        settings: MLSettings,
        metrics: MLMetrics | None = None,
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.settings = settings
        self.node_id = hashlib.sha256(settings.node_name.encode()).hexdigest()[:22]
        self.remote = RemoteCaller(timeout=settings.timeout, allow_private=settings.allow_private_addresses)
        self.budget = store.call_budget(settings.calls_per_minute, settings.concurrent_calls, settings.timeout)
        self.rate_limiters = RateLimiters(store)
        self.metrics = metrics or MLMetrics()
        self._box: SecretBox | None = None
        self.groups = ModelGroups(store)
        self.tasks = Tasks(store, self.node_id)
        self.connectors = Connectors(store, settings, lambda: self.box)
        self.models = Models(
            store,
            embedder,
            settings,
            self.node_id,
            connectors=self.connectors,
            groups=self.groups,
            tasks=self.tasks,
            rate_limiters=self.rate_limiters,
        )
        self.predictions = Predict(
            embedder,
            settings,
            models=self.models,
            connectors=self.connectors,
            rate_limiters=self.rate_limiters,
            remote=self.remote,
            budget=self.budget,
            metrics=self.metrics,
            box=lambda: self.box,
        )

    async def open(self) -> None:
        self._box = SecretBox(await self.store.master_key(new_master_key()))

    async def close(self) -> None:
        await self.remote.close()

    @property
    def box(self) -> SecretBox:
        assert self._box is not None, "MLService.open() first"
        return self._box

    async def _is_remote(self, owner: Principal, model_id: str) -> bool:
        stored = await self.store.get("model", owner, model_id)
        return stored is not None and stored.source.get("algorithm") == "REMOTE"

    async def chat_model(self, owner: Principal, model_id: str) -> RemoteChat | None:
        """``owner``'s remote model ``model_id`` as a chat model (for agentic memory's ``llm_id``), or None."""
        return RemoteChat(self.predictions, owner, model_id) if await self._is_remote(owner, model_id) else None

    async def embedding_model(self, owner: Principal, model_id: str) -> RemoteEmbedding | None:
        """``owner``'s remote model ``model_id`` as an embedding model (agentic ``embedding_model_id``), or None."""
        return RemoteEmbedding(self.predictions, owner, model_id) if await self._is_remote(owner, model_id) else None

    async def erase_user(self, organization_id: str, user_id: str) -> int:
        return await self.store.erase(Principal(organization_id, user_id))
