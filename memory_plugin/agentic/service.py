"""The agentic memory service: containers, memories, search and infer, with no HTTP in sight.

Every call names its owner.  Containers belong to one principal (organisation
and user); every memory call first loads the container *as that owner*, and
every store call is scoped to owner and container again, so another
principal's container, session or memory is absent (404) on every path, and
no search or delete by query can reach it.

The parts, as ml-commons splits them: ``containers``, ``memories``, ``search``
(semantic and hybrid), ``infer`` (the job runner and its strategies),
``forgetting``, ``retention`` and ``workers`` (the background loops).  This
class composes them and runs their lifecycle; the routes and the in-process
API call the parts directly, after ``require_enabled``.
"""

from __future__ import annotations

from embedder import AsyncEmbedder
from memory_plugin.agentic.containers import Containers
from memory_plugin.agentic.forgetting import Forgetting
from memory_plugin.agentic.infer import InferWorker
from memory_plugin.agentic.llm import ChatModel, ContainerModels, RegisteredModels
from memory_plugin.agentic.memories import Memories
from memory_plugin.agentic.metrics import AgenticMetrics
from memory_plugin.agentic.retention_service import RetentionService
from memory_plugin.agentic.retention_settings import RetentionDefaults
from memory_plugin.agentic.search import LongTermSearcher
from memory_plugin.agentic.stores.backend import AgenticStore
from memory_plugin.agentic.stores.sources import Forgotten
from memory_plugin.agentic.workers import EmbeddingWorker, settled
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

    def require_enabled(self) -> None:
        """Refuse as ml-commons does while the agentic API is off: the HTTP sub-app's middleware and the
        in-process API call it before any endpoint runs."""
        if not self.enabled:
            raise StatusForbidden(DISABLED)

    # -- erasure (not refused when disabled) ---------------------------------------------------

    async def erase_user(self, organization_id: str, user_id: str) -> int:
        """Part of erasing a user (the histories API's ``filter[user_id]`` delete), so it runs even with
        the agentic API disabled: the data may predate that setting."""
        return await self.containers.erase_user(organization_id, user_id)

    async def forget_user(self, organization_id: str, user_id: str) -> Forgotten:
        """The rest of erasing a user: what the organisation's shared containers hold under their user id."""
        return await self.forgetting.erase_user(organization_id, user_id)
