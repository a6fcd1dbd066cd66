"""The agentic memory service: containers, memories, search and infer, with no HTTP in sight.

Every call names its owner.  Containers belong to one principal (organisation
and user); every memory call first loads the container *as that owner*, and
every store call is scoped to owner and container again, so another
principal's container, session or memory is absent (404) on every path, and
no search or delete by query can reach it.

The parts, as ml-commons splits them: ``containers``, ``memories``, ``search``
(semantic and hybrid), ``infer`` (the job runner and its strategies) and
``workers`` (the background loops).  This façade composes them, answers 403
while the API is disabled, and is what the routes and the rest of the server
call.
"""

from __future__ import annotations

from typing import Any

from embedder import AsyncEmbedder
from memory_plugin.agentic.containers import Containers
from memory_plugin.agentic.forgetting import Forgetting
from memory_plugin.agentic.infer import InferWorker
from memory_plugin.agentic.llm import ChatModel, ContainerModels, RegisteredModels
from memory_plugin.agentic.memories import Memories
from memory_plugin.agentic.metrics import AgenticMetrics
from memory_plugin.agentic.requests import Body
from memory_plugin.agentic.retention_service import RetentionService
from memory_plugin.agentic.retention_settings import RetentionDefaults
from memory_plugin.agentic.search import LongTermSearcher
from memory_plugin.agentic.stores.backend import AgenticStore
from memory_plugin.agentic.stores.sources import Forgotten
from memory_plugin.agentic.workers import EmbeddingWorker, settled
from memory_plugin.auth import Principal
from memory_plugin.errors import StatusForbidden

DISABLED = (
    "The Agentic Memory APIs are not enabled. To enable, please update the setting "
    "plugins.ml_commons.agentic_memory_enabled"
)


class AgenticService:
    def __init__(
        self,
        store: AgenticStore,
        embedder: AsyncEmbedder,
        llm: ChatModel | None = None,
        *,
        models: RegisteredModels | None = None,
        enabled: bool = True,
        retention_enabled: bool = False,
        retention_defaults: RetentionDefaults | None = None,
        retention_interval: float = 86400.0,
        metrics: AgenticMetrics | None = None,
        forgetting: bool = True,
    ) -> None:
        """``llm``: the operator's default LLM; ``models``: the owners' registered models, which a container's
        ``llm_id`` and ``embedding_model_id`` name."""
        self.store = store
        self.embedder = embedder
        self.enabled = enabled
        self.metrics = metrics or AgenticMetrics()
        chosen = ContainerModels(embedder, llm, models)
        self.models = chosen
        # Each part takes the capabilities of the store it uses (``stores.backend``).
        self.embeddings = EmbeddingWorker(store, chosen, self.metrics, containers=store)
        self.infer = InferWorker(
            store,
            chosen,
            self.embeddings,
            self.metrics,
            containers=store,
            memory_docs=store,
            ranking=store,
            forgetter=store,
        )
        defaults = retention_defaults or RetentionDefaults()
        self.containers = Containers(store, chosen, retention_enabled=retention_enabled, retention_defaults=defaults)
        self.retention = RetentionService(
            store, store.retention(), defaults, enabled=retention_enabled, interval=retention_interval
        )
        self.memories = Memories(
            store,
            self.containers,
            chosen,
            embeddings=self.embeddings,
            infer=self.infer,
            retention_enabled=retention_enabled,
        )
        self.search = LongTermSearcher(store, self.containers, chosen, self.metrics, memory_docs=store)
        #: Deletes of working memory and sessions cascade to what was inferred from them (``forgetting``).
        self.forgetting = Forgetting(
            store,
            self.containers,
            self.memories,
            self.embeddings,
            memory_docs=store,
            container_store=store,
            enabled=forgetting,
        )
        self.infer.forgetting = forgetting

    # -- lifecycle ---------------------------------------------------------------------

    async def start(self) -> None:
        """Start the background workers; they first drain whatever a previous run left queued."""
        await self.embeddings.start()
        await self.infer.start()
        self.retention.start()

    async def stop(self) -> None:
        await self.retention.stop()
        await self.embeddings.stop()
        await self.infer.stop()
        await self.models.close()

    async def settled(self, timeout: float = 60.0) -> None:
        """Wait until no embedding or infer work is queued (tests and benchmarks)."""
        await settled((self.embeddings, self.infer), jobs=self.store, embeddings=self.store, timeout=timeout)

    async def drain_embeddings(self) -> None:
        await self.embeddings.drain()

    def _check(self) -> None:
        if not self.enabled:
            raise StatusForbidden(DISABLED)

    # -- containers ---------------------------------------------------------------------

    async def create_container(self, owner: Principal, body: Body) -> dict[str, Any]:
        self._check()
        return await self.containers.create(owner, body)

    async def get_container(self, owner: Principal, container_id: str) -> dict[str, Any]:
        self._check()
        return await self.containers.get(owner, container_id)

    async def update_container(self, owner: Principal, container_id: str, body: Body) -> dict[str, Any]:
        self._check()
        return await self.containers.update(owner, container_id, body)

    async def delete_container(
        self,
        owner: Principal,
        container_id: str,
        delete_all_memories: bool = False,
        delete_memories: list[str] | None = None,
    ) -> dict[str, Any]:
        self._check()
        return await self.containers.delete(owner, container_id, delete_all_memories, delete_memories)

    async def erase_user(self, organization_id: str, user_id: str) -> int:
        """Part of erasing a user (the histories API's ``filter[user_id]`` delete), so it runs even with
        the agentic API disabled: the data may predate that setting."""
        return await self.containers.erase_user(organization_id, user_id)

    async def forget_user(self, organization_id: str, user_id: str) -> Forgotten:
        """The rest of erasing a user: what the organisation's shared containers hold under their user id."""
        return await self.forgetting.erase_user(organization_id, user_id)

    async def search_containers(self, owner: Principal, body: Body) -> dict[str, Any]:
        self._check()
        return await self.containers.search(owner, body)

    # -- memories -------------------------------------------------------------------------

    async def add_memory(self, owner: Principal, container_id: str, body: Body) -> dict[str, Any]:
        self._check()
        return await self.memories.add(owner, container_id, body)

    async def create_session(self, owner: Principal, container_id: str, body: Body) -> dict[str, Any]:
        self._check()
        return await self.memories.create_session(owner, container_id, body)

    async def get_memory(
        self, owner: Principal, container_id: str, raw_type: str, memory_id: str, sources: bool = False
    ) -> dict[str, Any]:
        self._check()
        return await self.memories.get(owner, container_id, raw_type, memory_id, sources)

    async def update_memory(
        self, owner: Principal, container_id: str, raw_type: str, memory_id: str, body: Any
    ) -> dict[str, Any]:
        self._check()
        return await self.memories.update(owner, container_id, raw_type, memory_id, body)

    async def delete_memory(
        self, owner: Principal, container_id: str, raw_type: str, memory_id: str, report: bool = False
    ) -> dict[str, Any]:
        self._check()
        return await self.forgetting.delete(owner, container_id, raw_type, memory_id, report)

    async def search_memories(self, owner: Principal, container_id: str, raw_type: str, body: Body) -> dict[str, Any]:
        self._check()
        return await self.memories.search(owner, container_id, raw_type, body)

    async def delete_by_query(self, owner: Principal, container_id: str, raw_type: str, body: Body) -> dict[str, Any]:
        self._check()
        return await self.forgetting.delete_by_query(owner, container_id, raw_type, body)

    # -- long-term search -----------------------------------------------------------------

    async def semantic_search(self, owner: Principal, container_id: str, body: Body) -> dict[str, Any]:
        self._check()
        return await self.search.semantic(owner, container_id, body)

    async def hybrid_search(self, owner: Principal, container_id: str, body: Body) -> dict[str, Any]:
        self._check()
        return await self.search.hybrid(owner, container_id, body)

    # -- retention (docs/agentic-retention.md) ---------------------------------------------

    async def retention_dry_run(self, owner: Principal, container_id: str) -> dict[str, Any]:
        self._check()
        return await self.retention.dry_run(owner, container_id)

    async def retention_dry_run_all(self, owner: Principal) -> dict[str, Any]:
        self._check()
        return await self.retention.dry_run_all(owner)

    async def retention_execute(self, owner: Principal) -> dict[str, Any]:
        self._check()
        return await self.retention.execute(owner)
