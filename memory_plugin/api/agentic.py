"""Agentic memory in-process (``plugin.agentic``): containers, memories, sessions, search and forgetting.

The keyword arguments here are turned into the JSON bodies the HTTP routes read, in one place
(``_container_body``, ``_messages``, ``_present``), and parsed by the routes' parsers into the same typed
inputs, so the same checks (and their messages) apply.  The services' typed results come back as
``results``' dataclasses.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypedDict, Unpack

from memory_plugin.agentic.container_requests import (
    parse_container,
    parse_container_deletion,
    parse_container_search,
    parse_container_update,
)
from memory_plugin.agentic.memory_requests import (
    parse_add_memories,
    parse_delete_by_query,
    parse_long_term_search,
    parse_memory_search,
    parse_memory_update,
    parse_session,
)
from memory_plugin.agentic.service import AgenticService
from memory_plugin.agentic.views import container_view, found_memory_view, hits_view, ranked_view
from memory_plugin.api.results import (
    Added,
    AgenticDocument,
    Deleted,
    DeletedByQuery,
    MemoryContainer,
    MemoryType,
    ScoredMemory,
    SearchHits,
    SessionCreated,
    Written,
)
from memory_plugin.auth import Principal


@dataclass(frozen=True, slots=True)
class MemoryStrategy:
    """How an inferring add turns messages into long-term memories (AGENTIC.md 5).

    ``type``: ``semantic`` (facts), ``user_preference`` or ``summary``; ``namespace``: the namespace keys an
    add must carry for it to fire, whose values its memories are filed under.  ``id`` names an existing
    strategy in an update.
    """

    type: str = "semantic"
    namespace: Sequence[str] = ("user_id",)
    enabled: bool = True
    id: str | None = None
    llm_id: str | None = None
    system_prompt: str | None = None
    llm_result_path: str | None = None

    def body(self) -> dict[str, Any]:
        configuration = _present(
            llm_id=self.llm_id, system_prompt=self.system_prompt, llm_result_path=self.llm_result_path
        )
        return _present(
            id=self.id,
            type=self.type,
            namespace=list(self.namespace),
            enabled=self.enabled,
            configuration=configuration or None,
        )


class EmbeddingSettings(TypedDict, total=False):
    """The model that embeds a container's long-term memories: ``built-in`` (this server's model) or a
    registered model's id, with ``embedding_model_type`` (``TEXT_EMBEDDING``) and ``embedding_dimension``."""

    embedding_model_id: str
    embedding_model_type: str
    embedding_dimension: int


class ContainerSettings(EmbeddingSettings, total=False):
    """A container's ``configuration``, as keywords: models, strategies, indices and retention."""

    #: The LLM that infers: a registered remote model's id, or any name for the configured LLM connector.
    llm_id: str
    strategies: Sequence[MemoryStrategy]
    max_infer_size: int
    index_prefix: str
    use_system_index: bool
    disable_history: bool
    disable_session: bool
    parameters: Mapping[str, Any]
    index_settings: Mapping[str, Any]
    #: docs/agentic-retention.md; None opts out of the server's defaults.
    retention_policy: Mapping[str, Any] | None


class ChatMessage(TypedDict):
    """``content`` is text, or ml-commons' list of parts (``[{"type": "text", "text": …}]``)."""

    role: str
    content: str | Sequence[Mapping[str, Any]]


#: A conversation to add: a list of messages (``ChatMessage``-shaped dicts), or one text said by the user.
Messages = str | Sequence[ChatMessage] | Sequence[Mapping[str, Any]]


class MemoryChanges(TypedDict, total=False):
    """What an update may change, by memory type: long-term ``memory``, ``tags``, ``pinned``; sessions'
    ``summary``, ``metadata``, ``agents``, ``additional_info``, ``pinned``; working memory's ``messages``,
    ``binary_data``, ``structured_data``, ``structured_data_blob``, ``metadata``, ``tags``.  Others are ignored."""

    memory: str
    tags: Mapping[str, str]
    pinned: bool
    summary: str
    metadata: Mapping[str, Any]
    agents: Mapping[str, Any]
    additional_info: Mapping[str, Any]
    messages: Messages
    binary_data: str
    structured_data: Mapping[str, Any]
    structured_data_blob: Mapping[str, Any]


def _present(**values: Any) -> dict[str, Any]:
    """The body fields given (None: not given, as an absent JSON field)."""
    return {name: value for name, value in values.items() if value is not None}


def _container_body(settings: ContainerSettings) -> dict[str, Any]:
    configuration: dict[str, Any] = {key: value for key, value in settings.items() if key != "strategies"}
    if "strategies" in settings:
        configuration["strategies"] = [strategy.body() for strategy in settings["strategies"]]
    return configuration


def _messages(messages: Messages) -> list[dict[str, Any]]:
    """Messages in ml-commons' shape: a text becomes one text part; one text alone is the user's message."""
    if isinstance(messages, str):
        messages = [ChatMessage(role="user", content=messages)]
    shaped = []
    for message in messages:
        content: Any = message["content"]
        parts = [{"type": "text", "text": content}] if isinstance(content, str) else [dict(p) for p in content]
        shaped.append({"role": message["role"], "content": parts})
    return shaped


def _namespace(
    namespace: Mapping[str, str] | None, user_id: str | None, session_id: str | None
) -> dict[str, str] | None:
    merged = {**(namespace or {}), **_present(user_id=user_id, session_id=session_id)}
    return merged or None


class AgenticMemory:
    """The agentic memory API, each call as ``principal``; errors are the HTTP API's, raised."""

    def __init__(self, service: AgenticService) -> None:
        self._service = service

    def _on(self) -> AgenticService:
        """The service, refused as over HTTP (403) while agentic memory is disabled."""
        self._service.require_enabled()
        return self._service

    def built_in_embedding(self) -> EmbeddingSettings:
        """The settings that have this server's own model embed a container's memories:
        ``create_container(p, "notes", llm_id=…, strategies=[…], **mp.agentic.built_in_embedding())``."""
        return EmbeddingSettings(
            embedding_model_id="built-in",
            embedding_model_type="TEXT_EMBEDDING",
            embedding_dimension=self._service.embedder.dimension,
        )

    async def settled(self, timeout: float = 60.0) -> None:
        """Wait until inferring adds have run and new long-term memories are embedded (searchable)."""
        await self._service.settled(timeout)

    # -- containers -------------------------------------------------------------------------

    async def create_container(
        self,
        principal: Principal,
        name: str,
        *,
        description: str | None = None,
        container_id: str | None = None,
        backend_roles: Sequence[str] | None = None,
        **settings: Unpack[ContainerSettings],
    ) -> str:
        """A new container's id (``container_id`` chooses it).  ``backend_roles`` share it with keys holding one."""
        body = _present(
            name=name,
            description=description,
            memory_container_id=container_id,
            backend_roles=list(backend_roles) if backend_roles is not None else None,
            configuration=_container_body(settings),
        )
        containers = self._on().containers
        created = await containers.create(principal, parse_container(body, containers.retention_enabled))
        return created.container_id

    async def get_container(self, principal: Principal, container_id: str) -> MemoryContainer:
        found = await self._on().containers.get(principal, container_id)
        return MemoryContainer.of(container_id, container_view(found.source))

    async def update_container(
        self,
        principal: Principal,
        container_id: str,
        *,
        name: str | None = None,
        description: str | None = None,
        backend_roles: Sequence[str] | None = None,
        **settings: Unpack[ContainerSettings],
    ) -> Written:
        """Strategies with an ``id`` change that strategy; those without are added."""
        body = _present(
            name=name,
            description=description,
            backend_roles=list(backend_roles) if backend_roles is not None else None,
            configuration=_container_body(settings) or None,
        )
        containers = self._on().containers
        update = parse_container_update(body, containers.retention_enabled)
        return Written.of_write(await containers.update(principal, container_id, update))

    async def delete_container(
        self,
        principal: Principal,
        container_id: str,
        *,
        delete_all_memories: bool = False,
        delete_memories: Sequence[MemoryType] = (),
    ) -> Written:
        deletion = parse_container_deletion(
            {"delete_all_memories": delete_all_memories, "delete_memories": list(delete_memories)}
        )
        return Written.of_write(await self._on().containers.delete(principal, container_id, deletion))

    async def search_containers(self, principal: Principal, query: Mapping[str, Any]) -> SearchHits:
        """A query DSL body over the containers the principal may use."""
        found = await self._on().containers.search(principal, parse_container_search(query))
        return SearchHits.of(hits_view(found))

    # -- memories ---------------------------------------------------------------------------

    async def add(
        self,
        principal: Principal,
        container_id: str,
        messages: Messages | None = None,
        *,
        user_id: str | None = None,
        session_id: str | None = None,
        namespace: Mapping[str, str] | None = None,
        infer: bool = False,
        metadata: Mapping[str, str] | None = None,
        tags: Mapping[str, str] | None = None,
        payload_type: str | None = None,
        structured_data: Mapping[str, Any] | None = None,
        binary_data: str | None = None,
        parameters: Mapping[str, Any] | None = None,
    ) -> Added:
        """Add a working memory; with ``infer`` the container's strategies then extract long-term memories
        in the background (``settled`` waits for them).  ``user_id`` and ``session_id`` are namespace
        values: whom the memory is about, not who adds it (that is ``principal``)."""
        body = _present(
            messages=_messages(messages) if messages is not None else None,
            namespace=_namespace(namespace, user_id, session_id),
            infer=infer,
            metadata=metadata,
            tags=tags,
            payload_type=payload_type,
            structured_data=structured_data,
            binary_data=binary_data,
            parameters=parameters,
        )
        added = await self._on().memories.add(principal, container_id, parse_add_memories(body))
        return Added(added.working_memory_id, added.session_id)

    async def create_session(
        self,
        principal: Principal,
        container_id: str,
        *,
        session_id: str | None = None,
        summary: str | None = None,
        namespace: Mapping[str, str] | None = None,
        metadata: Mapping[str, Any] | None = None,
        agents: Mapping[str, Any] | None = None,
        additional_info: Mapping[str, Any] | None = None,
    ) -> SessionCreated:
        body = _present(
            session_id=session_id,
            summary=summary,
            namespace=namespace,
            metadata=metadata,
            agents=agents,
            additional_info=additional_info,
        )
        created = await self._on().memories.create_session(principal, container_id, parse_session(body))
        return SessionCreated(created.session_id, created.created)

    async def get(
        self,
        principal: Principal,
        container_id: str,
        memory_type: MemoryType,
        memory_id: str,
        *,
        sources: bool = False,
    ) -> AgenticDocument:
        """One memory; ``sources`` adds the working memories a long-term memory or history entry came from."""
        found = await self._on().memories.get(principal, container_id, memory_type, memory_id, sources)
        return AgenticDocument(memory_id, memory_type, found_memory_view(found))

    async def update(
        self,
        principal: Principal,
        container_id: str,
        memory_type: MemoryType,
        memory_id: str,
        **changes: Unpack[MemoryChanges],
    ) -> Written:
        body: dict[str, Any] = dict(changes)
        if "messages" in changes:
            body["messages"] = _messages(changes["messages"])
        memories = self._on().memories
        update = parse_memory_update(memory_type, body, memories.retention_enabled)
        return Written.of_write(await memories.update(principal, container_id, memory_id, update))

    async def delete(self, principal: Principal, container_id: str, memory_type: MemoryType, memory_id: str) -> Deleted:
        """Delete one memory.  A working memory or session is forgotten with what was inferred only from it
        (docs/agentic-forgetting.md); ``Deleted.forgotten`` reports what went."""
        return Deleted.of(
            await self._on().forgetting.delete(principal, container_id, memory_type, memory_id, report=True)
        )

    async def search_memories(
        self, principal: Principal, container_id: str, memory_type: MemoryType, query: Mapping[str, Any]
    ) -> SearchHits:
        """A query DSL body over one type of a container's memories."""
        found = await self._on().memories.search(
            principal, container_id, memory_type, parse_memory_search(memory_type, query)
        )
        return SearchHits.of(hits_view(found))

    async def delete_by_query(
        self, principal: Principal, container_id: str, memory_type: MemoryType, query: Mapping[str, Any]
    ) -> DeletedByQuery:
        """``query`` is the DSL query itself (``{"match_all": {}}``); working memories and sessions are forgotten."""
        request = parse_delete_by_query(memory_type, {"query": dict(query)})
        return DeletedByQuery.of(await self._on().forgetting.delete_by_query(principal, container_id, request))

    # -- long-term search -------------------------------------------------------------------

    async def search(
        self,
        principal: Principal,
        container_id: str,
        query: str,
        *,
        k: int = 10,
        user_id: str | None = None,
        namespace: Mapping[str, str] | None = None,
        tags: Mapping[str, str] | None = None,
        min_score: float | None = None,
        filter: Mapping[str, Any] | None = None,
    ) -> list[ScoredMemory]:
        """Semantic search of long-term memory: the ``k`` nearest by the container's embedding model."""
        body = self._search_body(query, k, user_id, namespace, tags, min_score, filter)
        found = await self._on().search.semantic(principal, container_id, parse_long_term_search(body))
        return [ScoredMemory.of(hit) for hit in SearchHits.of(ranked_view(found)).hits]

    async def hybrid_search(
        self,
        principal: Principal,
        container_id: str,
        query: str,
        *,
        k: int = 10,
        bm25_weight: float = 0.5,
        neural_weight: float = 0.5,
        user_id: str | None = None,
        namespace: Mapping[str, str] | None = None,
        tags: Mapping[str, str] | None = None,
        min_score: float | None = None,
        filter: Mapping[str, Any] | None = None,
    ) -> list[ScoredMemory]:
        """BM25 and semantic search of long-term memory, combined as OpenSearch's hybrid query does."""
        body: dict[str, Any] = {
            **self._search_body(query, k, user_id, namespace, tags, min_score, filter),
            "bm25_weight": bm25_weight,
            "neural_weight": neural_weight,
        }
        found = await self._on().search.hybrid(principal, container_id, parse_long_term_search(body, hybrid=True))
        return [ScoredMemory.of(hit) for hit in SearchHits.of(ranked_view(found)).hits]

    @staticmethod
    def _search_body(
        query: str,
        k: int,
        user_id: str | None,
        namespace: Mapping[str, str] | None,
        tags: Mapping[str, str] | None,
        min_score: float | None,
        filter: Mapping[str, Any] | None,
    ) -> dict[str, Any]:
        scope = _namespace(namespace, user_id, None)
        return _present(query=query, k=k, namespace=scope, tags=tags, min_score=min_score, filter=filter)
