"""The agentic memory API's names and document rules (AGENTIC.md sections 1-5): memory types, indices,
limits, and what a stored document's fields mean.

Containers, sessions, working, long-term and history documents are plain
JSON objects shaped as ml-commons stores them; ``requests`` checks what comes
in and builds them, ``views`` shapes what goes out.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from memory_plugin.auth import Principal
from memory_plugin.errors import InvalidArgument
from memory_plugin.opensearch_client import MAX_ID_BYTES, id_bytes

BASE = "/_plugins/_ml/memory_containers"
CONTAINER_INDEX = ".plugins-ml-am-memory-container"
SESSIONS, WORKING, LONG_TERM, HISTORY = "sessions", "working", "long-term", "history"
#: Where a container keeps its creator's backend roles (its ``owner`` is stored as the bare name).
OWNER_ROLES = "owner_backend_roles"
MEMORY_TYPES = (SESSIONS, WORKING, LONG_TERM, HISTORY)
STRATEGY_TYPES = ("SEMANTIC", "USER_PREFERENCE", "SUMMARY")
EMBEDDING_TYPES = ("TEXT_EMBEDDING", "SPARSE_ENCODING")
PAYLOAD_TYPES = ("conversational", "data")
DEFAULT_PREFIX = "default"
MAX_INFER_SIZE_DEFAULT = 5
MAX_INFER_SIZE_LIMIT = 10
MAX_K = 10000
#: The largest knn_vector dimension OpenSearch's lucene engine takes.
MAX_DIMENSION = 16000
#: ``namespace`` and ``tags`` terms one semantic or hybrid search may filter on: each is a term clause on
#: OpenSearch, beside the store's own (owner, container), within ``indices.query.bool.max_clause_count`` (1024).
MAX_SEARCH_TERMS = 1000

#: Keys a manual update may change, per memory type (AGENTIC.md 4.4), and those that bump last_updated_time.
UPDATABLE = {
    SESSIONS: ("summary", "metadata", "agents", "additional_info", "pinned"),
    WORKING: ("messages", "binary_data", "structured_data", "structured_data_blob", "metadata", "tags"),
    LONG_TERM: ("memory", "tags", "pinned"),
}
BUMPS = {
    SESSIONS: ("summary",),
    WORKING: ("messages", "binary_data", "structured_data", "structured_data_blob", "metadata", "tags"),
    LONG_TERM: ("memory",),
}


def valid_unicode(text: str) -> str:
    """Text with lone surrogates (valid in JSON, not in UTF-8) replaced, so SQLite can bind it and an LLM's
    answer can be stored and served."""
    return text if text.isascii() else text.encode("utf-8", "replace").decode("utf-8")


def check_session_id(value: str, parameter: str) -> str:
    """A session id the caller chose: it becomes a document id, so 1 to 512 bytes, as OpenSearch takes it."""
    size = id_bytes(value)
    if not 0 < size <= MAX_ID_BYTES:
        raise InvalidArgument(
            f"[{parameter}] must be 1 to {MAX_ID_BYTES} bytes long, but was {size}", parameter=parameter
        )
    return value


def now_millis() -> int:
    return int(time.time() * 1000)


def index_name(container: Mapping[str, Any], memory_type: str) -> str:
    """The ml-commons index a type of this container's memory lives in."""
    config = container.get("configuration", {})
    prefix = config.get("index_prefix", DEFAULT_PREFIX)
    name = f"{prefix}-memory-{memory_type}"
    return f".plugins-ml-am-{name}" if config.get("use_system_index", True) else name


def store_prefix(container: Mapping[str, Any]) -> str:
    """The part of an OpenSearch store's index names that tells containers' indices apart, as ``index_name``."""
    config = container.get("configuration", {})
    prefix = str(config.get("index_prefix", DEFAULT_PREFIX))
    return prefix if config.get("use_system_index", True) else f"user-{prefix}"


def parse_memory_type(raw: str) -> str:
    lowered = raw.lower()
    if lowered not in MEMORY_TYPES:
        raise InvalidArgument(
            f"Invalid memory type: {raw}. Must be one of: sessions, working, long-term, history", parameter="type"
        )
    return lowered


def enabled_types(container: Mapping[str, Any]) -> set[str]:
    """Which memory indices a container has (AGENTIC.md 2): working always, the rest by configuration."""
    config = container.get("configuration", {})
    types = {WORKING}
    if not config.get("disable_session", False):
        types.add(SESSIONS)
    if config.get("llm_id") and config.get("strategies"):
        types.add(LONG_TERM)
        if not config.get("disable_history", False):
            types.add(HISTORY)
    return types


def message_text(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    return " ".join(str(part.get("text", "")) for part in content or () if isinstance(part, dict))


def flat_object_terms(doc: Mapping[str, Any]) -> list[tuple[str, str]]:
    """``(field, value)`` pairs of the ``namespace`` and ``tags`` maps, for term filters."""
    pairs = []
    for field in ("namespace", "tags"):
        for key, value in (doc.get(field) or {}).items():
            pairs.append((f"{field}.{key}", str(value)))
    return pairs


@dataclass(frozen=True, slots=True)
class EmbeddingChoice:
    """Which model embeds a container's long-term memories (the owner's registered one, or None for the
    built-in model), and the dimension its vectors must have."""

    model_id: str | None
    dimension: int | None

    @classmethod
    def of(cls, config: Mapping[str, Any]) -> EmbeddingChoice:
        model_id, dimension = config.get("embedding_model_id"), config.get("embedding_dimension")
        return cls(
            model_id if isinstance(model_id, str) and model_id else None,
            dimension if isinstance(dimension, int) and not isinstance(dimension, bool) else None,
        )


@dataclass(frozen=True)
class Container:
    """A memory container as its memories see it: its configuration, the indices its memory types live in,
    and which types it has."""

    id: str
    source: Mapping[str, Any]
    #: Its owner, whose registered models its ``llm_id`` and ``embedding_model_id`` name, whoever uses it.
    owner: Principal | None = None

    @property
    def config(self) -> Mapping[str, Any]:
        config: Mapping[str, Any] = self.source.get("configuration", {})
        return config

    @property
    def embedding(self) -> EmbeddingChoice:
        return EmbeddingChoice.of(self.config)

    def index(self, memory_type: str) -> str:
        return index_name(self.source, memory_type)

    def has(self, memory_type: str) -> bool:
        return memory_type in enabled_types(self.source)

    @property
    def strategies(self) -> tuple[Strategy, ...]:
        return tuple(Strategy.from_source(strategy) for strategy in self.config.get("strategies", []))


@dataclass(frozen=True)
class Strategy:
    """One of a container's strategies (AGENTIC.md 5) as the infer worker runs it.  Stored as the JSON object
    ``requests.parse_strategy`` checked (its ``configuration`` texts are strings or absent)."""

    id: str
    type: str
    #: The namespace keys an add must carry for the strategy to fire; its memories are filed under their values.
    namespace: tuple[str, ...]
    enabled: bool = True
    #: The strategy's own LLM, ahead of the container's.
    llm_id: str | None = None
    llm_result_path: str | None = None
    system_prompt: str | None = None

    @classmethod
    def from_source(cls, source: Mapping[str, Any]) -> Strategy:
        config = source.get("configuration") or {}
        return cls(
            id=source["id"],
            type=source["type"],
            namespace=tuple(source["namespace"]),
            enabled=bool(source.get("enabled", True)),
            llm_id=config.get("llm_id"),
            llm_result_path=config.get("llm_result_path"),
            system_prompt=config.get("system_prompt"),
        )

    def scope(self, namespace: Mapping[str, str]) -> dict[str, str] | None:
        """The add's namespace values this strategy files memories under, or None when it does not fire:
        disabled, or missing one of its keys (AGENTIC.md 5)."""
        if not self.enabled or not all(key in namespace for key in self.namespace):
            return None
        return {key: namespace[key] for key in self.namespace}


@dataclass(frozen=True)
class LongTermMemory:
    """A long-term memory an infer run adds: one fact of a strategy, filed under the namespace values it fired
    on.  ``to_source`` is the document both stores keep, its keys in the order ml-commons writes them."""

    memory: str
    strategy: Strategy
    namespace: Mapping[str, str]
    owner_id: str
    container_id: str
    created_time: int
    tags: Mapping[str, Any] | None = None

    def to_source(self) -> dict[str, Any]:
        source: dict[str, Any] = {
            "memory": self.memory,
            "strategy_type": self.strategy.type,
            "strategy_id": self.strategy.id,
            "namespace": self.namespace,
            "namespace_size": len(self.namespace),
        }
        if self.tags:
            source["tags"] = self.tags
        source.update(
            {
                "owner_id": self.owner_id,
                "memory_container_id": self.container_id,
                "created_time": self.created_time,
                "last_updated_time": self.created_time,
            }
        )
        return source
