"""Memories of a container: adding them (with the session an add creates or touches, and its infer job),
sessions, one memory by id, and search and delete by query over a memory type."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from memory_plugin.agentic import prompts
from memory_plugin.agentic.containers import Containers, found_container
from memory_plugin.agentic.llm import DEFAULT_RESULT_PATH, NO_LLM, ChatModel, ContainerModels, LLMError, read_path
from memory_plugin.agentic.memory_requests import AddMemoriesInput, DeleteByQueryInput, MemoryUpdate, SessionInput
from memory_plugin.agentic.models import (
    HISTORY,
    LONG_TERM,
    Container,
    now_millis,
    parse_memory_type,
    valid_unicode,
)
from memory_plugin.agentic.results import AddMemoriesResult, DeletedByQuery, FoundMemory, Hits, SessionCreated, Written
from memory_plugin.agentic.search import matching_ids
from memory_plugin.agentic.stores.base import MemoryAdd, SessionWrite, StoredDoc, owner_id
from memory_plugin.agentic.stores.memories import MemoryDocStore
from memory_plugin.agentic.views import took
from memory_plugin.auth import Principal
from memory_plugin.background import Worker
from memory_plugin.clock import new_id
from memory_plugin.dsl import DocumentHit, SearchBody, bounded, execute
from memory_plugin.dsl.pushdown import required_terms, sorted_page
from memory_plugin.errors import InvalidArgument, StatusBadRequest, StatusNotFound, UpstreamFailed


def found_memory(stored: StoredDoc | None) -> StoredDoc:
    """The memory a store call found; a 404 in ml-commons' words when it is absent or not the caller's."""
    if stored is None:
        raise StatusNotFound("Memory not found")
    return stored


class Memories:
    def __init__(
        self,
        store: MemoryDocStore,
        containers: Containers,
        models: ContainerModels,
        *,
        embeddings: Worker,
        infer: Worker,
        retention_enabled: bool,
    ) -> None:
        self.store = store
        self.containers = containers
        self.models = models
        #: Woken when a long-term memory's text changes, and when an add queues an infer job.
        self.embeddings = embeddings
        self.infer = infer
        self.retention_enabled = retention_enabled

    async def add(self, owner: Principal, container_id: str, request: AddMemoriesInput) -> AddMemoriesResult:
        container = await self.containers.load(owner, container_id)
        config = container.config
        if request.infer and not config.get("llm_id"):
            raise InvalidArgument(
                "infer=true requires llm_model_id to be configured in memory storage", parameter="infer"
            )
        if request.infer and await self.models.chat(container.owner or owner, config.get("llm_id")) is None:
            raise InvalidArgument(NO_LLM, parameter="infer")
        # The session an add creates is written into its namespace (``_session_for``).
        namespace = dict(request.namespace or {})
        parameters = {**config.get("parameters", {}), **(request.parameters or {})}
        created = now_millis()
        session = await self._session_for(
            owner, container, request.payload_type, request.messages, namespace, parameters, created
        )
        working_id = new_id()
        working = _working_doc(owner, container_id, request, namespace, created)
        infer_request = None
        if request.infer:
            infer_request = {
                "working_memory_id": working_id,
                "messages": request.messages,
                "namespace": namespace,
                "tags": dict(request.tags or {}),
                "parameters": parameters,
            }
        if not await self.store.add_memory(owner, container_id, MemoryAdd(working_id, working, session, infer_request)):
            found_container(None)  # deleted since it was read above
        if request.infer:
            self.infer.wake()
        return AddMemoriesResult(working_id, namespace.get("session_id"))

    async def _session_for(
        self,
        owner: Principal,
        container: Container,
        payload_type: str,
        messages: list[dict[str, Any]] | None,
        namespace: dict[str, str],
        parameters: Mapping[str, Any],
        created: int,
    ) -> SessionWrite | None:
        """The session an add creates (and writes into ``namespace.session_id``) or touches."""
        config = container.config
        if config.get("disable_session", False):
            return None
        base = {"owner_id": owner_id(owner), "memory_container_id": container.id}
        if "session_id" in namespace:
            doc = {
                **base,
                "namespace": {"session_id": namespace["session_id"]},
                "namespace_size": 1,
                "created_time": created,
                "last_updated_time": created,
            }
            return SessionWrite(namespace["session_id"], doc, touched_time=created)
        if payload_type != "conversational" or not config.get("llm_id"):
            return None
        chat = await self.models.chat(container.owner or owner, config.get("llm_id"))
        summary = await self._summarise(chat, messages or [], parameters) if chat is not None and messages else None
        session_id = new_id()
        doc = {**base, **({"summary": summary} if summary else {})}
        if namespace:
            doc["namespace"] = dict(namespace)
        doc["created_time"] = created
        doc["last_updated_time"] = created
        namespace["session_id"] = session_id
        return SessionWrite(session_id, doc)

    async def _summarise(self, chat: ChatModel, messages: list[dict[str, Any]], parameters: Mapping[str, Any]) -> str:
        session_parameters = parameters.get("session") if isinstance(parameters.get("session"), dict) else {}
        words = session_parameters.get("max_summary_size", 10) if session_parameters else 10
        if not isinstance(words, int) or isinstance(words, bool) or words < 1:
            words = 10
        path = parameters.get("llm_result_path") if isinstance(parameters.get("llm_result_path"), str) else None
        try:
            answer = await chat.complete(
                prompts.SUMMARY_SYSTEM.format(words=words), prompts.summary_user_prompt(messages, words)
            )
            summary = read_path(answer, path or DEFAULT_RESULT_PATH)
        except LLMError as error:
            if "llm_result_path" in str(error):
                raise InvalidArgument(
                    f"Failed to summarise the session: {error}", parameter="llm_result_path"
                ) from None
            raise UpstreamFailed(f"Failed to summarise the session: {error}") from None
        return valid_unicode(summary.strip() if isinstance(summary, str) else json.dumps(summary, ensure_ascii=False))

    async def create_session(self, owner: Principal, container_id: str, request: SessionInput) -> SessionCreated:
        container = await self.containers.load(owner, container_id)
        if container.config.get("disable_session", False):
            raise StatusBadRequest("Session is disabled for this container")
        if request.refused is not None:
            raise request.refused
        session_id = request.session_id or new_id()
        namespace = request.namespace
        created = now_millis()
        doc: dict[str, Any] = {"owner_id": owner_id(owner), "memory_container_id": container_id}
        optional = {
            "summary": request.summary,
            "metadata": request.metadata,
            "agents": request.agents,
            "additional_info": request.additional_info,
            "namespace": namespace,
            "namespace_size": len(namespace) if namespace else None,
        }
        doc.update({key: value for key, value in optional.items() if value is not None})
        doc["created_time"] = created
        doc["last_updated_time"] = created
        created_now = await self.store.create_session(owner, container_id, session_id, doc)
        if created_now is None:
            found_container(None)  # deleted since it was read above
        return SessionCreated(session_id, bool(created_now))

    # -- one memory ------------------------------------------------------------------------

    async def _typed(self, owner: Principal, container_id: str, raw_type: str) -> tuple[Container, str]:
        memory_type = parse_memory_type(raw_type)
        container = await self.containers.load(owner, container_id)
        if not container.has(memory_type):
            raise StatusNotFound("Memory index not found")
        return container, memory_type

    async def get(
        self, owner: Principal, container_id: str, raw_type: str, memory_id: str, sources: bool = False
    ) -> FoundMemory:
        """``sources`` (ours, for the console) adds ``memory_sources``: the working memories an infer run wrote a
        long-term memory or history entry from, each with the text its run left (docs/agentic-forgetting.md)."""
        _, memory_type = await self._typed(owner, container_id, raw_type)
        if sources and memory_type not in (LONG_TERM, HISTORY):
            raise InvalidArgument(f"[sources] is for long-term and history memory, not {raw_type}", parameter="sources")
        stored = found_memory(await self.store.get(owner, container_id, memory_type, memory_id))
        embedding = None
        if memory_type == LONG_TERM:
            embedding = (await self.store.embeddings(owner, container_id, [memory_id])).get(memory_id)
        found_sources = None
        if sources:
            found_sources = await self.store.sources(owner, container_id, memory_type, memory_id) or []
        return FoundMemory(memory_type, stored, embedding, found_sources)

    async def update(self, owner: Principal, container_id: str, memory_id: str, request: MemoryUpdate) -> Written:
        container, memory_type = await self._typed(owner, container_id, request.memory_type)
        found_memory(await self.store.get(owner, container_id, memory_type, memory_id))
        if request.refused is not None:
            raise request.refused
        updates = dict(request.fields)  # the fields written (None: removed)
        if request.bumps:
            updates["last_updated_time"] = now_millis()

        def merge(current: dict[str, Any]) -> dict[str, Any]:
            """Into the doc as the store holds it at the write, so that concurrent updates all count."""
            return {key: value for key, value in {**current, **updates}.items() if value is not None}

        replaced = found_memory(await self.store.update(owner, container_id, memory_type, memory_id, merge))
        if memory_type == LONG_TERM:
            self.embeddings.wake()
        return Written(container.index(memory_type), replaced, "updated")

    async def delete(self, owner: Principal, container_id: str, raw_type: str, memory_id: str) -> Written:
        container, memory_type = await self._typed(owner, container_id, raw_type)
        stored = found_memory(await self.store.delete(owner, container_id, memory_type, memory_id))
        return Written(container.index(memory_type), stored, "deleted")

    # -- search and delete by query ------------------------------------------------------------

    async def _candidates(
        self, owner: Principal, container_id: str, memory_type: str, query: SearchBody, *, scores_shown: bool = True
    ) -> list[StoredDoc]:
        """The docs ``query`` is evaluated over: those its required exact terms select from the store's postings
        when that gives the same answer (``dsl.pushdown``), else every doc of the type in the container."""
        required = required_terms(query, self.store.indexed_field, scores_shown=scores_shown)
        if not required:
            return await self.store.docs(owner, container_id, memory_type)
        terms = [(term.paths, term.values) for term in required]
        return await self.store.docs_matching(owner, container_id, memory_type, terms)

    async def _page(
        self, owner: Principal, container_id: str, memory_type: str, query: SearchBody
    ) -> tuple[list[StoredDoc], int | None]:
        """The docs a search evaluates, and how many match when that is known without them: a session load (exact
        terms, sorted by one field) reads only its page, however long the session (``dsl.pushdown.sorted_page``)."""
        page = sorted_page(query, self.store.indexed_field)
        if page is not None:
            terms = [(term.paths, term.values) for term in page.required]
            sort = (page.field, page.descending, page.limit)
            found = await self.store.sorted_page(owner, container_id, memory_type, terms, sort, page.count_up_to)
            if found is not None:
                total, docs = found
                return docs, total
        return await self._candidates(owner, container_id, memory_type, query), None

    async def search(self, owner: Principal, container_id: str, raw_type: str, query: SearchBody) -> Hits:
        container, memory_type = await self._typed(owner, container_id, raw_type)
        started = time.perf_counter()
        docs, total = await self._page(owner, container_id, memory_type, query)
        # A big container's evaluation runs off the event loop, which keeps answering meanwhile, within budget.
        rows = [(doc.id, doc.source) for doc in docs]
        result = await bounded(lambda budget: execute(query, rows, budget=budget))
        if total is not None:  # the page's docs were evaluated, and the store counted the matches
            result = replace(result, total=total)
        if memory_type == LONG_TERM and query.source.enabled and result.hits:
            # The raw _source holds the embedding, as on a real node; only the hits' vectors are read.
            sources = {doc.id: doc.source for doc in docs}
            vectors = await self.store.embeddings(owner, container_id, [hit.id for hit in result.hits])
            hits = tuple(
                DocumentHit(
                    hit.id,
                    hit.score,
                    query.source.apply(
                        {**sources[hit.id], **({"memory_embedding": vectors[hit.id]} if hit.id in vectors else {})}
                    ),
                    hit.sort,
                )
                for hit in result.hits
            )
            result = replace(result, hits=hits)
        return Hits(container.index(memory_type), result, took(started), docs)

    async def delete_by_query(self, owner: Principal, container_id: str, request: DeleteByQueryInput) -> DeletedByQuery:
        memory_type = request.memory_type
        container = await self.containers.load(owner, container_id)
        if not container.has(memory_type):
            raise InvalidArgument(f"Invalid memory type or memory type is disabled: {memory_type}")
        started = time.perf_counter()
        docs = await self._candidates(owner, container_id, memory_type, request.query, scores_shown=False)
        matched, timed_out = await matching_ids(request.query, docs)
        deleted = await self.store.delete_ids(owner, container_id, memory_type, matched)
        return DeletedByQuery(took(started), timed_out, len(matched), deleted)


def _working_doc(
    owner: Principal, container_id: str, request: AddMemoriesInput, namespace: Mapping[str, str], created: int
) -> dict[str, Any]:
    """The working memory an add stores, in ml-commons' field order; ``namespace`` holds its session's id."""
    working: dict[str, Any] = {
        "owner_id": owner_id(owner),
        "memory_container_id": container_id,
        "payload_type": request.payload_type,
    }
    optional = {
        "messages": request.messages,
        "message_id": request.message_id,
        "binary_data": request.binary_data,
        "structured_data": request.structured_data,
        "structured_data_blob": request.structured_data_blob,
        "namespace": dict(namespace) or None,
        "namespace_size": len(namespace) or None,
        "infer": request.infer,
        "metadata": dict(request.metadata) if request.metadata else None,
        "tags": dict(request.tags) if request.tags else None,
        "parameters": request.parameters,
        "checkpoint_id": request.checkpoint_id,
        "session_id": namespace.get("session_id"),
    }
    working.update({key: value for key, value in optional.items() if value is not None})
    working["created_time"] = created
    working["last_updated_time"] = created
    return working
