"""The agentic memory service: containers, memories, infer and search, with no HTTP in sight.

Every call names its owner.  Containers belong to one principal (organisation
and user); every memory call first loads the container *as that owner*, and
every store call is scoped to owner and container again, so another
principal's container, session or memory is absent (404) on every path, and
no search or delete by query can reach it.

Two background tasks do what ml-commons does off the request path:

* the **embedder drain** embeds long-term memories marked pending (after an
  infer run or an update of their text) in micro-batches through the shared
  :class:`~embedder.AsyncEmbedder`;
* the **infer worker** runs queued inferring adds (extract facts, find
  similar memories, decide, apply) and applies each run in one transaction
  with its history, dropping its job in the same transaction.

Both queues are tables, written in the transaction that caused them, and
both tasks drain them at start, so a SIGKILL loses no acknowledged work and
never leaves half of an infer run applied.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from embedder import AsyncEmbedder
from memory_plugin.agentic import prompts
from memory_plugin.agentic.errors import (
    Conflict,
    StatusBadRequest,
    StatusForbidden,
    StatusNotFound,
    UpstreamFailed,
)
from memory_plugin.agentic.llm import (
    DEFAULT_RESULT_PATH,
    ChatModel,
    LLMError,
    RegisteredModels,
    TextEmbedding,
    first_json_object,
    read_path,
)
from memory_plugin.agentic.metrics import AgenticMetrics
from memory_plugin.agentic.models import (
    BUMPS,
    CONTAINER_INDEX,
    HISTORY,
    LONG_TERM,
    MAX_K,
    MAX_SEARCH_TERMS,
    UPDATABLE,
    WORKING,
    boolean,
    check_session_id,
    container_view,
    enabled_types,
    flat_object_terms,
    index_name,
    integer,
    new_container,
    now_millis,
    number,
    obj,
    parse_memory_type,
    parse_messages,
    string_map,
    text,
    updated_container,
    valid_unicode,
)
from memory_plugin.agentic.stores.base import (
    AgenticStore,
    InferJob,
    LongTermChange,
    LongTermScope,
    MemoryAdd,
    PendingEmbedding,
    SessionWrite,
    StoredDoc,
    owner_id,
)
from memory_plugin.auth import Principal
from memory_plugin.clock import new_id
from memory_plugin.dsl import (
    DocumentHit,
    DocumentResults,
    SearchBody,
    bounded,
    execute,
    matching,
    parse_search,
    search_response,
)
from memory_plugin.errors import InvalidArgument

log = logging.getLogger("memory_plugin.agentic")

DISABLED = (
    "The Agentic Memory APIs are not enabled. To enable, please update the setting "
    "plugins.ml_commons.agentic_memory_enabled"
)
NO_LLM = (
    "infer=true needs an LLM connector, and none is configured: set agentic_llm_url "
    "(MEMORY_PLUGIN_AGENTIC_LLM_URL) to an OpenAI-compatible chat completions endpoint, or register a "
    "remote model (/_plugins/_ml/models/_register) and name it as the container's llm_id"
)
SHARDS = {"total": 2, "successful": 1, "failed": 0}
EMBED_BATCH = 64
#: A container whose embedding model failed is tried again after this long.
EMBED_RETRY_SECONDS = 5.0
INFER_BATCH = 8
#: An infer job that keeps failing for reasons other than the LLM (a bug) is dropped after this many tries.
MAX_INFER_ATTEMPTS = 5


#: A request's JSON object body; None when the request had none.
Body = Mapping[str, Any] | None


def _required(body: Body) -> Mapping[str, Any]:
    if body is None:
        raise InvalidArgument("Request body is required")
    return body


def _found_container(stored: StoredDoc | None) -> StoredDoc:
    """The container a store call found; a 404 in ml-commons' words when it is absent or not the caller's."""
    if stored is None:
        raise StatusNotFound("Memory container not found")
    return stored


def _found_memory(stored: StoredDoc | None) -> StoredDoc:
    """The memory a store call found, likewise."""
    if stored is None:
        raise StatusNotFound("Memory not found")
    return stored


def cosine_score(cosine: float) -> float:
    """OpenSearch's score of a ``cosinesimil`` k-NN hit."""
    return (1.0 + cosine) / 2.0


def _took(started: float) -> int:
    return int((time.perf_counter() - started) * 1000)


def _without_nested(query: Any) -> Any:
    """``nested`` queries evaluate their inner query (objects of an array are matched as one flattened doc).

    Only an inner query that is an object is unwrapped: a ``nested`` without one stays, for the parser's 400
    (unwrapped, ``"query": null`` would read as no query, and a delete by query would delete everything)."""
    if isinstance(query, dict):
        if (
            set(query) == {"nested"}
            and isinstance(query["nested"], dict)
            and isinstance(query["nested"].get("query"), dict)
        ):
            return _without_nested(query["nested"]["query"])
        return {key: _without_nested(value) for key, value in query.items()}
    if isinstance(query, list):
        return [_without_nested(item) for item in query]
    return query


async def _matching(query: SearchBody, docs: list[StoredDoc]) -> tuple[list[str], bool]:
    """Ids of the docs the query matches, and whether the evaluation ran out of budget (off the event loop)."""
    rows = [(doc.id, doc.source) for doc in docs]
    return await bounded(lambda budget: matching(query, rows, budget=budget))


def _write_response(container_index: str, stored: StoredDoc, result: str) -> dict[str, Any]:
    return {
        "_index": container_index,
        "_id": stored.id,
        "_version": stored.version,
        "result": result,
        "forced_refresh": True,
        "_shards": SHARDS,
        "_seq_no": stored.seq_no,
        "_primary_term": 1,
    }


def min_max(scores: Mapping[str, float]) -> dict[str, float]:
    """OpenSearch's ``min_max`` normalisation: 1.0 for a lone or uniform list, at least 0.001 for any hit."""
    if not scores:
        return {}
    low, high = min(scores.values()), max(scores.values())
    if high == low:
        return {key: 1.0 for key in scores}
    return {key: max((value - low) / (high - low), 0.001) for key, value in scores.items()}


def hybrid_scores(
    bm25: Mapping[str, float], neural: Mapping[str, float], bm25_weight: float, neural_weight: float
) -> dict[str, float]:
    """Min-max normalise each list, then the weighted arithmetic mean (a doc absent from a list scores 0 there)."""
    lexical, semantic = min_max(bm25), min_max(neural)
    total = bm25_weight + neural_weight
    return {
        key: (bm25_weight * lexical.get(key, 0.0) + neural_weight * semantic.get(key, 0.0)) / total
        for key in {**lexical, **semantic}
    }


@dataclass(frozen=True)
class LongTermSearch:
    """A checked semantic or hybrid search: its container, the docs it ranks, its text, ``k`` and ``min_score``."""

    container: StoredDoc
    scope: LongTermScope
    query: str
    k: int
    min_score: float | None
    #: The ``filter``'s evaluation ran out of budget: only the docs it examined could be found.
    timed_out: bool = False


def _checked(vectors: np.ndarray, config: Mapping[str, Any]) -> np.ndarray:
    """A model's vectors, if they have the container's ``embedding_dimension`` and a direction (a cosine
    needs one): a remote model may answer anything, and a container outlives a change of built-in model."""
    vectors = np.asarray(vectors, dtype=np.float32)
    dimension, model_id = config.get("embedding_dimension"), config.get("embedding_model_id")
    if vectors.ndim != 2 or vectors.shape[1] != dimension:
        raise UpstreamFailed(
            f"The embedding model {model_id} answered {vectors.shape[-1]}-dimensional vectors; "
            f"the memory container's embedding_dimension is {dimension}"
        )
    if not np.isfinite(vectors).all() or not np.linalg.norm(vectors, axis=1).all():
        raise UpstreamFailed(f"The embedding model {model_id} answered a zero or non-finite vector")
    return vectors


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
        metrics: AgenticMetrics | None = None,
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.llm = llm
        #: A container's ``llm_id`` or ``embedding_model_id`` that names the owner's registered model calls it.
        self.models = models
        self.enabled = enabled
        self.retention_enabled = retention_enabled
        self.metrics = metrics or AgenticMetrics()
        self._embed_wakeup = asyncio.Event()
        self._infer_wakeup = asyncio.Event()
        self._embed_lock = asyncio.Lock()
        self._tasks: list[asyncio.Task[None]] = []
        #: Background drains in progress: a store's queue can look empty while a drain's write is in flight.
        self._draining = 0

    # -- lifecycle ---------------------------------------------------------------------

    async def start(self) -> None:
        """Start the background tasks; they first drain whatever a previous run left queued."""
        self._embed_wakeup.set()
        self._infer_wakeup.set()
        self._tasks = [
            asyncio.create_task(self._loop(self._embed_wakeup, self.drain_embeddings), name="agentic-embed"),
            asyncio.create_task(self._loop(self._infer_wakeup, self.drain_infer), name="agentic-infer"),
        ]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []
        if self.llm is not None:
            await self.llm.close()

    async def _loop(self, wakeup: asyncio.Event, drain: Any) -> None:
        while True:
            await wakeup.wait()
            wakeup.clear()
            self._draining += 1
            try:
                await drain()
            except asyncio.CancelledError:
                raise
            except Exception:  # a store failure (a full disk): keep the queue, try again shortly
                log.exception("agentic background work failed; retrying")
                await asyncio.sleep(1.0)
                wakeup.set()
            finally:
                self._draining -= 1

    async def settled(self, timeout: float = 60.0) -> None:
        """Wait until no embedding or infer work is queued (tests and benchmarks)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            # On OpenSearch a bulk that adds memories and drops their job becomes visible shard by shard,
            # so the queues alone can look empty mid-write: a drain in progress or pending is not settled.
            busy = self._draining or self._embed_wakeup.is_set() or self._infer_wakeup.is_set()
            # Jobs first: a job's changes (pending embeddings) commit in the transaction that drops it.
            if not busy and not await self.store.infer_jobs(1) and not await self.store.pending_count():
                return
            await asyncio.sleep(0.02)
        raise TimeoutError("agentic background work did not settle")

    async def drain_embeddings(self) -> None:
        """Embed what is pending, each container's with its own model.  A container whose model fails (a
        remote model down, or answering the wrong dimension) keeps its memories pending and is skipped
        until a retry a little later, so that it holds up no other container."""
        async with self._embed_lock:
            failed: set[str] = set()
            while pending := await self.store.pending_embeddings(EMBED_BATCH, skip=failed):
                groups: dict[str, list[PendingEmbedding]] = {}
                for entry in pending:
                    groups.setdefault(entry.container_id, []).append(entry)
                for container_id, group in groups.items():
                    try:
                        vectors = await self._passages(group[0].owner, container_id, [entry.text for entry in group])
                    except asyncio.CancelledError:
                        raise
                    except Exception as error:
                        log.warning("embedding memory container %s failed, retrying later: %s", container_id, error)
                        self.metrics.embed_failures.inc()
                        failed.add(container_id)
                        continue
                    stored = await self.store.store_embeddings(
                        [(entry.key, entry.text, vector) for entry, vector in zip(group, vectors)]
                    )
                    self.metrics.embedded.inc(stored)
            if failed:
                asyncio.get_running_loop().call_later(EMBED_RETRY_SECONDS, self._embed_wakeup.set)

    async def _passages(self, owner: Principal, container_id: str, texts: list[str]) -> np.ndarray:
        container = await self.store.get_container(owner, container_id)
        if container is None:
            raise LookupError(f"memory container {container_id} is gone")
        config = container.source.get("configuration", {})
        embedding = await self._embedding(owner, config)
        # Background work for every organisation: one fairness key, one share of the built-in embedder.
        return _checked(await embedding.passages(texts, tenant="agentic-background"), config)

    async def _embedding(self, owner: Principal, config: Mapping[str, Any]) -> TextEmbedding:
        """The model a container's ``embedding_model_id`` names: the owner's registered remote model of that
        id, else the built-in model (which needs nothing registered)."""
        model_id = config.get("embedding_model_id")
        if self.models is not None and isinstance(model_id, str) and model_id:
            remote = await self.models.embedding_model(owner, model_id)
            if remote is not None:
                return remote
        return self.embedder

    async def _query_vector(self, embedding: TextEmbedding, config: Mapping[str, Any], text: str) -> np.ndarray:
        vector = np.asarray(await embedding.query(text)).reshape(1, -1)
        return _checked(vector, config).reshape(-1)

    async def _model_dimension(self, owner: Principal, body: Mapping[str, Any]) -> int | None:
        """The dimension a container's ``embedding_dimension`` must have: the built-in model's, or None (any)
        when its ``embedding_model_id`` names the owner's registered remote model."""
        raw = body.get("configuration")
        config = raw if isinstance(raw, dict) else {}
        return None if await self._embedding(owner, config) is not self.embedder else self.embedder.dimension

    async def drain_infer(self) -> None:
        while True:
            jobs = await self.store.infer_jobs(INFER_BATCH)
            if not jobs:
                return
            for job in jobs:
                await self._run_job(job)

    def _check(self) -> None:
        if not self.enabled:
            raise StatusForbidden(DISABLED)

    # -- containers ---------------------------------------------------------------------

    async def _container(self, owner: Principal, container_id: str) -> StoredDoc:
        return _found_container(await self.store.get_container(owner, container_id))

    async def create_container(self, owner: Principal, body: Body) -> dict[str, Any]:
        self._check()
        body = _required(body)
        doc = new_container(body, await self._model_dimension(owner, body), self.retention_enabled, owner_id(owner))
        while True:
            container_id = new_id()
            if await self.store.insert_container(owner, container_id, doc) is not None:
                return {"memory_container_id": container_id, "status": "created"}

    async def get_container(self, owner: Principal, container_id: str) -> dict[str, Any]:
        self._check()
        stored = await self.store.get_container(owner, container_id)
        if stored is None:
            raise StatusNotFound(
                f"Failed to find memory container with the provided memory container id: {container_id}"
            )
        return container_view(stored.source)

    async def update_container(self, owner: Principal, container_id: str, body: Body) -> dict[str, Any]:
        self._check()
        body = _required(body)
        current = await self._container(owner, container_id)
        doc = updated_container(current.source, body, await self._model_dimension(owner, body), self.retention_enabled)
        stored = _found_container(await self.store.replace_container(owner, container_id, doc))
        response = _write_response(CONTAINER_INDEX, stored, "updated")
        del response["forced_refresh"]
        return response

    async def delete_container(
        self,
        owner: Principal,
        container_id: str,
        delete_all_memories: bool = False,
        delete_memories: list[str] | None = None,
    ) -> dict[str, Any]:
        self._check()
        types = [parse_memory_type(name.strip()) for name in delete_memories or () if name.strip()]
        container = await self._container(owner, container_id)
        if delete_all_memories or types:
            config = container.source.get("configuration", {})
            sharing = [
                other
                for other in await self.store.containers(owner)
                if other.id != container_id
                and index_name(other.source, WORKING) == index_name(container.source, WORKING)
            ]
            if sharing:
                raise Conflict(
                    "Cannot delete memory indices as multiple containers share the index prefix "
                    f"'{config.get('index_prefix')}'. Delete the memories of this container by query instead, "
                    "or delete the container without delete_all_memories or delete_memories."
                )
        # The container's memories go with it: no path could reach them afterwards.
        stored = _found_container(await self.store.delete_container(owner, container_id))
        return _write_response(CONTAINER_INDEX, stored, "deleted")

    async def erase_user(self, organization_id: str, user_id: str) -> int:
        """Delete a user's containers in one organisation, every memory in them included: how many went.

        Part of erasing a user (the histories API's ``filter[user_id]`` delete), so it runs even with
        the agentic API disabled: the data may predate that setting."""
        owner, erased = Principal(organization_id, user_id), 0
        for container in await self.store.containers(owner):
            erased += await self.store.delete_container(owner, container.id) is not None
        return erased

    async def search_containers(self, owner: Principal, body: Body) -> dict[str, Any]:
        self._check()
        query = parse_search(_without_nested(body))
        started = time.perf_counter()
        containers = await self.store.containers(owner)
        extras = {c.id: {"_version": c.version, "_seq_no": c.seq_no, "_primary_term": 1} for c in containers}
        rows = [(c.id, container_view(c.source)) for c in containers]
        result = await bounded(lambda budget: execute(query, rows, budget=budget))
        return search_response(result, _took(started), index=CONTAINER_INDEX, hit_extras=extras.__getitem__)

    # -- adding memory -------------------------------------------------------------------

    async def add_memory(self, owner: Principal, container_id: str, body: Body) -> dict[str, Any]:
        self._check()
        body = _required(body)
        container = await self._container(owner, container_id)
        config = container.source.get("configuration", {})
        payload_type = (text(body, "payload_type") or "conversational").lower()
        if payload_type not in ("conversational", "data"):
            raise InvalidArgument(
                f"Invalid payload_type: {body.get('payload_type')}. Must be one of: conversational, data",
                parameter="payload_type",
            )
        messages = parse_messages(body)
        infer = boolean(body, "infer", False)
        if "pinned" in body:
            raise InvalidArgument("Working memory cannot be pinned", parameter="pinned")
        if infer and not messages:
            raise InvalidArgument("No messages provided when inferring memory", parameter="messages")
        if infer and not config.get("llm_id"):
            raise InvalidArgument(
                "infer=true requires llm_model_id to be configured in memory storage", parameter="infer"
            )
        if infer and await self._chat(owner, config.get("llm_id")) is None:
            raise InvalidArgument(NO_LLM, parameter="infer")
        namespace = string_map(body, "namespace") or {}
        if "session_id" in namespace:
            check_session_id(namespace["session_id"], "namespace.session_id")
        metadata, tags = string_map(body, "metadata"), string_map(body, "tags")
        parameters = {**config.get("parameters", {}), **(obj(body, "parameters") or {})}
        created = now_millis()
        session = await self._session_for(owner, container, payload_type, messages, namespace, parameters, created)
        working: dict[str, Any] = {
            "owner_id": owner_id(owner),
            "memory_container_id": container_id,
            "payload_type": payload_type,
        }
        optional = {
            "messages": messages,
            "message_id": integer(body, "message_id"),
            "binary_data": text(body, "binary_data"),
            "structured_data": obj(body, "structured_data"),
            "structured_data_blob": obj(body, "structured_data_blob"),
            "namespace": namespace or None,
            "namespace_size": len(namespace) or None,
            "infer": infer,
            "metadata": metadata or None,
            "tags": tags or None,
            "parameters": obj(body, "parameters") or None,
            "checkpoint_id": text(body, "checkpoint_id"),
            "session_id": namespace.get("session_id"),
        }
        working.update({key: value for key, value in optional.items() if value is not None})
        working["created_time"] = created
        working["last_updated_time"] = created
        working_id = new_id()
        infer_request = None
        if infer:
            infer_request = {
                "working_memory_id": working_id,
                "messages": messages,
                "namespace": namespace,
                "tags": tags or {},
                "parameters": parameters,
            }
        if not await self.store.add_memory(owner, container_id, MemoryAdd(working_id, working, session, infer_request)):
            _found_container(None)  # deleted since it was read above
        if infer:
            self._infer_wakeup.set()
        response = {"working_memory_id": working_id}
        if "session_id" in namespace:
            response = {"session_id": namespace["session_id"], **response}
        return response

    async def _session_for(
        self,
        owner: Principal,
        container: StoredDoc,
        payload_type: str,
        messages: list[dict[str, Any]] | None,
        namespace: dict[str, str],
        parameters: Mapping[str, Any],
        created: int,
    ) -> SessionWrite | None:
        """The session an add creates (and writes into ``namespace.session_id``) or touches."""
        config = container.source.get("configuration", {})
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
        chat = await self._chat(owner, config.get("llm_id"))
        summary = await self._summarise(chat, messages or [], parameters) if chat is not None and messages else None
        session_id = new_id()
        doc = {**base, **({"summary": summary} if summary else {})}
        if namespace:
            doc["namespace"] = dict(namespace)
        doc["created_time"] = created
        doc["last_updated_time"] = created
        namespace["session_id"] = session_id
        return SessionWrite(session_id, doc)

    async def _chat(self, owner: Principal, llm_id: Any) -> ChatModel | None:
        """The model an ``llm_id`` names: the owner's registered remote model of that id, called with their
        connector and key; else the operator's default LLM (``agentic_llm_url``), or None without one."""
        if self.models is not None and isinstance(llm_id, str) and llm_id:
            registered = await self.models.chat_model(owner, llm_id)
            if registered is not None:
                return registered
        return self.llm

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

    async def create_session(self, owner: Principal, container_id: str, body: Body) -> dict[str, Any]:
        self._check()
        body = _required(body)
        container = await self._container(owner, container_id)
        if container.source.get("configuration", {}).get("disable_session", False):
            raise StatusBadRequest("Session is disabled for this container")
        chosen = text(body, "session_id")
        session_id = check_session_id(chosen, "session_id") if chosen else new_id()
        namespace = string_map(body, "namespace")
        created = now_millis()
        doc: dict[str, Any] = {"owner_id": owner_id(owner), "memory_container_id": container_id}
        optional = {
            "summary": text(body, "summary"),
            "metadata": obj(body, "metadata"),
            "agents": obj(body, "agents"),
            "additional_info": obj(body, "additional_info"),
            "namespace": namespace or None,
            "namespace_size": len(namespace) if namespace else None,
        }
        doc.update({key: value for key, value in optional.items() if value is not None})
        doc["created_time"] = created
        doc["last_updated_time"] = created
        created_now = await self.store.create_session(owner, container_id, session_id, doc)
        if created_now is None:
            _found_container(None)  # deleted since it was read above
        return {"session_id": session_id, "status": "created" if created_now else "exists"}

    # -- one memory ------------------------------------------------------------------------

    async def _typed(self, owner: Principal, container_id: str, raw_type: str) -> tuple[StoredDoc, str]:
        memory_type = parse_memory_type(raw_type)
        container = await self._container(owner, container_id)
        if memory_type not in enabled_types(container.source):
            raise StatusNotFound("Memory index not found")
        return container, memory_type

    async def get_memory(self, owner: Principal, container_id: str, raw_type: str, memory_id: str) -> dict[str, Any]:
        self._check()
        _, memory_type = await self._typed(owner, container_id, raw_type)
        stored = _found_memory(await self.store.get(owner, container_id, memory_type, memory_id))
        doc = dict(stored.source)
        if memory_type == WORKING:
            for hidden in ("namespace_size", "parameters", "session_id", "tenant_id"):
                doc.pop(hidden, None)
        elif memory_type == LONG_TERM:
            doc.pop("memory_container_id", None)
            embedding = (await self.store.embeddings(owner, container_id, [memory_id])).get(memory_id)
            if embedding is not None:
                doc["memory_embedding"] = embedding
        return doc

    async def update_memory(
        self, owner: Principal, container_id: str, raw_type: str, memory_id: str, body: Any
    ) -> dict[str, Any]:
        self._check()
        if not isinstance(body, dict) or not body:
            raise InvalidArgument("Text cannot be null or empty")
        memory_type = parse_memory_type(raw_type)
        if memory_type == HISTORY:
            raise StatusNotFound("Can't update memory history")
        container, memory_type = await self._typed(owner, container_id, raw_type)
        stored = _found_memory(await self.store.get(owner, container_id, memory_type, memory_id))
        doc = dict(stored.source)
        changes = {key: body[key] for key in UPDATABLE[memory_type] if key in body}
        if "pinned" in changes:
            if not self.retention_enabled:
                raise StatusForbidden(
                    "Pinning needs memory retention. To enable, please update the setting agentic_retention_enabled "
                    "(plugins.ml_commons.memory.retention_enabled)"
                )
            doc["pinned"] = boolean(changes, "pinned")
        if memory_type == LONG_TERM and "memory" in changes:
            memory = text(changes, "memory")
            if not memory or not memory.strip():
                raise InvalidArgument("[memory] cannot be null or empty", parameter="memory")
            doc["memory"] = memory
        if memory_type == WORKING and "messages" in changes:
            doc["messages"] = parse_messages(changes)
        for key in ("summary", "binary_data"):
            if key in changes:
                doc[key] = text(changes, key)
        for key in ("metadata", "agents", "additional_info", "structured_data", "structured_data_blob"):
            if key in changes and not (key == "metadata" and memory_type == WORKING):
                doc[key] = obj(changes, key)
        for key in ("tags",) + (("metadata",) if memory_type == WORKING else ()):
            if key in changes:
                doc[key] = string_map(changes, key)
        doc = {key: value for key, value in doc.items() if value is not None}
        if any(key in changes for key in BUMPS[memory_type]):
            doc["last_updated_time"] = now_millis()
        replaced = _found_memory(await self.store.replace(owner, container_id, memory_type, memory_id, doc))
        if memory_type == LONG_TERM:
            self._embed_wakeup.set()
        return _write_response(index_name(container.source, memory_type), replaced, "updated")

    async def delete_memory(self, owner: Principal, container_id: str, raw_type: str, memory_id: str) -> dict[str, Any]:
        self._check()
        container, memory_type = await self._typed(owner, container_id, raw_type)
        stored = _found_memory(await self.store.delete(owner, container_id, memory_type, memory_id))
        return _write_response(index_name(container.source, memory_type), stored, "deleted")

    # -- search and delete by query ------------------------------------------------------------

    async def search_memories(self, owner: Principal, container_id: str, raw_type: str, body: Body) -> dict[str, Any]:
        self._check()
        if body is None:
            raise InvalidArgument("Search memories request has empty body")
        query = parse_search(_without_nested(body))
        container, memory_type = await self._typed(owner, container_id, raw_type)
        started = time.perf_counter()
        docs = await self.store.docs(owner, container_id, memory_type)
        # A big container's evaluation runs off the event loop, which keeps answering meanwhile, within budget.
        rows = [(doc.id, doc.source) for doc in docs]
        result = await bounded(lambda budget: execute(query, rows, budget=budget))
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
        by_id = {doc.id: {"_version": doc.version, "_seq_no": doc.seq_no, "_primary_term": 1} for doc in docs}
        return search_response(
            result, _took(started), index=index_name(container.source, memory_type), hit_extras=by_id.__getitem__
        )

    async def delete_by_query(self, owner: Principal, container_id: str, raw_type: str, body: Body) -> dict[str, Any]:
        self._check()
        memory_type = parse_memory_type(raw_type)
        if body is None or body.get("query") is None:
            raise InvalidArgument(
                "Query parameter is required for delete by query operation. "
                'To delete all memories, use {"query": {"match_all": {}}}'
            )
        query = parse_search({"query": _without_nested(body["query"]), "size": 0})
        container = await self._container(owner, container_id)
        if memory_type not in enabled_types(container.source):
            raise InvalidArgument(f"Invalid memory type or memory type is disabled: {memory_type}")
        started = time.perf_counter()
        docs = await self.store.docs(owner, container_id, memory_type)
        matched, timed_out = await _matching(query, docs)
        deleted = await self.store.delete_ids(owner, container_id, memory_type, matched)
        return {
            "took": _took(started),
            "timed_out": timed_out,
            "total": len(matched),
            "updated": 0,
            "created": 0,
            "deleted": deleted,
            "batches": 1 if matched else 0,
            "version_conflicts": 0,
            "noops": 0,
            "retries": {"bulk": 0, "search": 0},
            "throttled_millis": 0,
            "requests_per_second": -1.0,
            "throttled_until_millis": 0,
            "failures": [],
        }

    async def _long_term_search(self, owner: Principal, container_id: str, body: Body, kind: str) -> LongTermSearch:
        """Validate a semantic or hybrid search body (AGENTIC.md 4.7, 4.8) against its container."""
        body = _required(body)
        query = text(body, "query")
        if query is None or not query.strip():
            raise InvalidArgument("query cannot be null or blank", parameter="query")
        k = integer(body, "k")
        k = 10 if k is None else k
        if not 1 <= k <= MAX_K:
            raise InvalidArgument("k must be between 1 and 10000", parameter="k")
        terms = flat_object_terms({name: string_map(body, name) for name in ("namespace", "tags")})
        if len(terms) > MAX_SEARCH_TERMS:
            raise InvalidArgument(
                f"namespace and tags hold {len(terms)} terms; a search may filter on at most {MAX_SEARCH_TERMS}",
                parameter=max(("namespace", "tags"), key=lambda name: len(body.get(name) or ())),
            )
        min_score = number(body, "min_score")
        dsl_filter = body.get("filter")
        if dsl_filter is not None and not isinstance(dsl_filter, dict):
            raise InvalidArgument("[filter] must be a query object", parameter="filter")
        parsed_filter = parse_search({"query": _without_nested(dsl_filter), "size": 0}) if dsl_filter else None
        container = await self._container(owner, container_id)
        config = container.source.get("configuration", {})
        if (
            not config.get("embedding_model_id")
            or not config.get("strategies")
            or LONG_TERM not in enabled_types(container.source)
        ):
            raise InvalidArgument(
                f"{kind} search needs a memory container with an embedding model, an LLM and at least one strategy; "
                f"memory container {container_id} has no long-term memory"
            )
        only_ids, timed_out = None, False
        if parsed_filter is not None:
            docs = await self.store.docs(owner, container_id, LONG_TERM)
            ids, timed_out = await _matching(parsed_filter, docs)
            only_ids = set(ids)
        scope = LongTermScope(owner, container_id, terms, only_ids)
        return LongTermSearch(container, scope, query, k, min_score, timed_out)

    def _search_response(
        self, search: LongTermSearch, scored: list[tuple[StoredDoc, float]], started: float
    ) -> dict[str, Any]:
        hits = []
        for doc, score in scored:
            if search.min_score is not None and score < search.min_score:
                continue
            source = {key: value for key, value in doc.source.items() if key != "memory_embedding"}
            hits.append(DocumentHit(doc.id, score, source))
        top = max((h.score or 0.0 for h in hits), default=None)
        result = DocumentResults(len(hits), top, tuple(hits), search.timed_out)
        return search_response(result, _took(started), index=index_name(search.container.source, LONG_TERM))

    async def _container_query_vector(self, owner: Principal, container: StoredDoc, text: str) -> np.ndarray:
        config = container.source.get("configuration", {})
        return await self._query_vector(await self._embedding(owner, config), config, text)

    async def semantic_search(self, owner: Principal, container_id: str, body: Body) -> dict[str, Any]:
        self._check()
        search = await self._long_term_search(owner, container_id, body, "Semantic")
        started = time.perf_counter()
        vector = await self._container_query_vector(owner, search.container, search.query)
        found = await self.store.knn(search.scope, vector, search.k)
        self.metrics.searches.labels("semantic").inc()
        return self._search_response(search, [(doc, cosine_score(cosine)) for doc, cosine in found], started)

    async def hybrid_search(self, owner: Principal, container_id: str, body: Body) -> dict[str, Any]:
        self._check()
        weights = {}
        for name in ("bm25_weight", "neural_weight"):
            value = number(body or {}, name)
            weights[name] = 0.5 if value is None else value
            if not 0.0 <= weights[name] <= 1.0:
                raise InvalidArgument(f"{name} must be between 0.0 and 1.0", parameter=name)
        if abs(weights["bm25_weight"] + weights["neural_weight"] - 1.0) > 0.001:
            raise InvalidArgument("bm25_weight and neural_weight must sum to 1.0", parameter="bm25_weight")
        search = await self._long_term_search(owner, container_id, body, "Hybrid")
        started = time.perf_counter()
        vector = await self._container_query_vector(owner, search.container, search.query)
        lexical = await self.store.bm25(search.scope, search.query, search.k)
        semantic = await self.store.knn(search.scope, vector, search.k)
        docs = {doc.id: doc for doc, _ in lexical + semantic}
        combined = hybrid_scores(
            {doc.id: score for doc, score in lexical},
            {doc.id: cosine_score(cosine) for doc, cosine in semantic},
            weights["bm25_weight"],
            weights["neural_weight"],
        )
        ranked = sorted(combined.items(), key=lambda item: (-item[1], docs[item[0]].seq))[: search.k]
        self.metrics.searches.labels("hybrid").inc()
        return self._search_response(search, [(docs[key], score) for key, score in ranked], started)

    # -- infer ---------------------------------------------------------------------------------

    async def _run_job(self, job: InferJob) -> None:
        started = time.perf_counter()
        container = await self.store.get_container(job.owner, job.container_id)
        if container is None:
            await self.store.apply_infer(job, [], [])
            return
        config = container.source.get("configuration", {})
        request = job.request
        namespace: dict[str, str] = request.get("namespace", {})
        changes: list[LongTermChange] = []
        history: list[tuple[str, dict[str, Any]]] = []
        outcome = "applied"
        try:
            for strategy in config.get("strategies", []):
                if not strategy.get("enabled", True) or not all(key in namespace for key in strategy["namespace"]):
                    continue  # AGENTIC.md 5: a strategy fires only when all its keys are present
                scope = {key: namespace[key] for key in strategy["namespace"]}
                try:
                    strategy_changes = await self._run_strategy(job, config, strategy, scope)
                except (LLMError, UpstreamFailed) as error:  # the LLM or the embedding model failed
                    outcome = "error"
                    history.append((new_id(), self._error_record(job, scope, str(error))))
                    continue
                changes += strategy_changes
                history += [(new_id(), self._history_record(job, change, scope)) for change in strategy_changes]
        except Exception as error:  # a bug or a store failure: retried, then recorded
            if job.attempts + 1 < MAX_INFER_ATTEMPTS:
                await self.store.count_infer_attempt(job)
                raise
            log.exception("infer job %s failed %d times; recording the error", job.job_id, MAX_INFER_ATTEMPTS)
            changes, history, outcome = (
                [],
                [(new_id(), self._error_record(job, {}, f"internal error: {error}"))],
                "error",
            )
        if config.get("disable_history", False):
            history = []
        await self.store.apply_infer(job, changes, history)
        self.metrics.infer_runs.labels(outcome).inc()
        self.metrics.infer_seconds.observe(time.perf_counter() - started)
        for change in changes:
            self.metrics.long_term_changes.labels(change.event).inc()
        if changes:
            self._embed_wakeup.set()

    async def _llm_json(
        self, chat: ChatModel | None, system_prompt: str, user_prompt: str, path: str
    ) -> dict[str, Any]:
        if chat is None:
            raise LLMError(NO_LLM)
        answer = await chat.complete(system_prompt, user_prompt)
        return first_json_object(read_path(answer, path))

    async def _run_strategy(
        self, job: InferJob, config: Mapping[str, Any], strategy: Mapping[str, Any], scope: dict[str, str]
    ) -> list[LongTermChange]:
        """Extract facts, find similar memories, decide, and return the changes (AGENTIC.md 6, steps 1-6)."""
        strategy_config = strategy.get("configuration") or {}
        request_parameters = job.request.get("parameters") or {}
        path = (
            strategy_config.get("llm_result_path") or request_parameters.get("llm_result_path") or DEFAULT_RESULT_PATH
        )
        system_prompt = strategy_config.get("system_prompt") or prompts.EXTRACTION[strategy["type"]]
        if strategy_config.get("system_prompt") and not prompts.custom_prompt_usable(system_prompt):
            raise LLMError('The strategy system_prompt must ask for JSON with a "facts" array')
        # AGENTIC.md 6: the strategy's own llm_id, else the container's
        chat = await self._chat(job.owner, strategy_config.get("llm_id") or config.get("llm_id"))
        extracted = await self._llm_json(
            chat, system_prompt, prompts.extraction_user_prompt(job.request["messages"]), path
        )
        facts = extracted.get("facts")
        if not isinstance(facts, list) or not all(isinstance(fact, str) for fact in facts):
            raise LLMError('The LLM answer has no "facts" array of strings')
        facts = [valid_unicode(fact.strip()) for fact in facts if fact.strip()]
        if not facts:
            return []
        max_infer = int(config.get("max_infer_size") or 5)
        terms = flat_object_terms({"namespace": scope})
        terms += [("namespace_size", str(len(scope))), ("strategy_id", strategy["id"])]
        similar = LongTermScope(job.owner, job.container_id, terms)
        await self.drain_embeddings()  # earlier runs' memories must be findable
        embedding = await self._embedding(job.owner, config)
        old: dict[str, tuple[str, float]] = {}
        for fact in facts[:max_infer]:
            vector = await self._query_vector(embedding, config, fact)
            for doc, cosine in await self.store.knn(similar, vector, max_infer):
                score = cosine_score(cosine)
                if doc.id not in old or old[doc.id][1] < score:
                    old[doc.id] = (str(doc.source.get("memory", "")), score)
        now = now_millis()
        if not old:
            return [self._add(job, strategy, scope, fact, now) for fact in facts]
        old_memory = [{"id": key, "text": memory, "score": round(score, 6)} for key, (memory, score) in old.items()]
        decided = await self._llm_json(chat, prompts.DECISION, prompts.decision_user_prompt(old_memory, facts), path)
        decisions = decided.get("memory_decision")
        if not isinstance(decisions, list):
            raise LLMError('The LLM answer has no "memory_decision" array')
        changes: list[LongTermChange] = []
        for decision in decisions:
            if not isinstance(decision, dict):
                continue
            event = str(decision.get("event", "")).upper()
            memory_text = decision.get("text")
            target = str(decision.get("id", ""))
            if isinstance(memory_text, str):
                memory_text = valid_unicode(memory_text)
            if event == "ADD" and isinstance(memory_text, str) and memory_text.strip():
                changes.append(self._add(job, strategy, scope, memory_text.strip(), now))
            elif event in ("UPDATE", "DELETE") and target in old:  # only memories this run retrieved
                before = old[target][0]
                if event == "UPDATE" and isinstance(memory_text, str) and memory_text.strip():
                    changes.append(
                        LongTermChange(
                            "UPDATE", target, memory=memory_text.strip(), last_updated_time=now, doc={"before": before}
                        )
                    )
                elif event == "DELETE":
                    changes.append(LongTermChange("DELETE", target, doc={"before": before}))
        return changes

    def _add(
        self, job: InferJob, strategy: Mapping[str, Any], scope: dict[str, str], fact: str, now: int
    ) -> LongTermChange:
        doc: dict[str, Any] = {
            "memory": fact,
            "strategy_type": strategy["type"],
            "strategy_id": strategy["id"],
            "namespace": scope,
            "namespace_size": len(scope),
        }
        if job.request.get("tags"):
            doc["tags"] = job.request["tags"]
        doc.update(
            {
                "owner_id": owner_id(job.owner),
                "memory_container_id": job.container_id,
                "created_time": now,
                "last_updated_time": now,
            }
        )
        return LongTermChange("ADD", new_id(), doc=doc)

    def _history_record(self, job: InferJob, change: LongTermChange, scope: dict[str, str]) -> dict[str, Any]:
        record: dict[str, Any] = {
            "owner_id": owner_id(job.owner),
            "memory_container_id": job.container_id,
            "memory_id": change.memory_id,
            "action": change.event,
            "namespace": scope,
            "namespace_size": len(scope),
        }
        if job.request.get("tags"):
            record["tags"] = job.request["tags"]
        record["created_time"] = now_millis()
        if change.event == "ADD" and change.doc is not None:
            record["after"] = {"memory": change.doc["memory"]}
        elif change.event == "UPDATE":
            record["before"] = {"memory": (change.doc or {}).get("before")}
            record["after"] = {"memory": change.memory}
        elif change.event == "DELETE":
            record["before"] = {"memory": (change.doc or {}).get("before")}
        return record

    def _error_record(self, job: InferJob, scope: dict[str, str], error: str) -> dict[str, Any]:
        record: dict[str, Any] = {"memory_container_id": job.container_id, "created_time": now_millis()}
        if scope:
            record["namespace"] = scope
            record["namespace_size"] = len(scope)
        if job.request.get("tags"):
            record["tags"] = job.request["tags"]
        record["owner_id"] = owner_id(job.owner)
        record["error"] = error
        return record
