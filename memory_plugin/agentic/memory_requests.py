"""Memory requests of the agentic memory API: add and long-term search bodies, checked into typed inputs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from memory_plugin.agentic.models import (
    BUMPS,
    HISTORY,
    LONG_TERM,
    MAX_K,
    MAX_SEARCH_TERMS,
    UPDATABLE,
    WORKING,
    check_session_id,
    flat_object_terms,
    parse_memory_type,
)
from memory_plugin.agentic.requests import (
    Body,
    JsonObject,
    boolean,
    integer,
    number,
    obj,
    required,
    string_map,
    text,
    without_nested,
)
from memory_plugin.agentic.retention_policy import PINNED_DISABLED, PINNED_WORKING
from memory_plugin.agentic.stores.opensearch_documents import NESTED_PATHS
from memory_plugin.dsl import SearchBody, parse_search
from memory_plugin.errors import (
    ContentParseError,
    InvalidArgument,
    ServiceError,
    StatusBadRequest,
    StatusForbidden,
    StatusNotFound,
)


def parse_messages(body: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    messages = body.get("messages")
    if messages is None:
        return None
    if not isinstance(messages, list):
        raise ContentParseError("[messages] must be an array", parameter="messages")
    for message in messages:
        if not isinstance(message, dict) or message.get("role") is None or message.get("content") is None:
            raise InvalidArgument("Message must have role and content", parameter="messages")
        if not isinstance(message["role"], str):
            raise ContentParseError("[role] must be a string", parameter="messages")
        content = message["content"]
        # An array of objects, as ml-commons parses it (a string would be a 500 from OpenSearch's flat_object).
        if not isinstance(content, list) or not all(isinstance(part, dict) for part in content):
            raise ContentParseError("[content] must be an array of objects", parameter="messages")
    return messages


@dataclass(frozen=True, slots=True)
class AddMemoriesInput:
    """An add request's body, checked (ml-commons' ``MLAddMemoriesInput``): what the container allows
    (``infer`` needs its LLM) is the service's to decide.  Empty maps are None, as absent ones."""

    payload_type: str
    messages: list[dict[str, Any]] | None = None
    infer: bool = False
    namespace: Mapping[str, str] | None = None
    metadata: Mapping[str, str] | None = None
    tags: Mapping[str, str] | None = None
    #: The request's own; the container's ``parameters`` are their defaults.
    parameters: dict[str, Any] | None = None
    message_id: int | None = None
    binary_data: str | None = None
    structured_data: dict[str, Any] | None = None
    structured_data_blob: dict[str, Any] | None = None
    checkpoint_id: str | None = None

    @property
    def session_id(self) -> str | None:
        return self.namespace.get("session_id") if self.namespace else None


def parse_add_memories(body: Body) -> AddMemoriesInput:
    """An add request's body, checked field by field in the order (and with the messages) ml-commons answers."""
    body = required(body)
    payload_type = (text(body, "payload_type") or "conversational").lower()
    if payload_type not in ("conversational", "data"):
        raise InvalidArgument(
            f"Invalid payload_type: {body.get('payload_type')}. Must be one of: conversational, data",
            parameter="payload_type",
        )
    messages = parse_messages(body)
    infer = boolean(body, "infer", False) or False
    if body.get("pinned") is not None:
        raise StatusBadRequest(PINNED_WORKING, parameter="pinned")
    if infer and not messages:
        raise InvalidArgument("No messages provided when inferring memory", parameter="messages")
    namespace = string_map(body, "namespace")
    if namespace and "session_id" in namespace:
        check_session_id(namespace["session_id"], "namespace.session_id")
    metadata, tags = string_map(body, "metadata"), string_map(body, "tags")
    return AddMemoriesInput(
        payload_type,
        messages,
        infer,
        namespace or None,
        metadata or None,
        tags or None,
        obj(body, "parameters") or None,
        integer(body, "message_id"),
        text(body, "binary_data"),
        obj(body, "structured_data"),
        obj(body, "structured_data_blob"),
        text(body, "checkpoint_id"),
    )


@dataclass(frozen=True, slots=True)
class LongTermSearchInput:
    """A semantic or hybrid search body, checked (AGENTIC.md 4.7, 4.8); its container is the service's to check."""

    query: str
    k: int = 10
    #: ``(field, value)`` term filters from ``namespace`` and ``tags``.
    terms: tuple[tuple[str, str], ...] = ()
    min_score: float | None = None
    filter: SearchBody | None = None
    #: Hybrid search's weights (semantic search has none).
    bm25_weight: float = 0.5
    neural_weight: float = 0.5


def parse_long_term_search(body: Body, *, hybrid: bool = False) -> LongTermSearchInput:
    """A semantic (or ``hybrid``) search body; hybrid's weights are checked first, as before any other field."""
    weights = {}
    if hybrid:
        for name in ("bm25_weight", "neural_weight"):
            value = number(body or {}, name)
            weights[name] = 0.5 if value is None else value
            if not 0.0 <= weights[name] <= 1.0:
                raise InvalidArgument(f"{name} must be between 0.0 and 1.0", parameter=name)
        if abs(weights["bm25_weight"] + weights["neural_weight"] - 1.0) > 0.001:
            raise InvalidArgument("bm25_weight and neural_weight must sum to 1.0", parameter="bm25_weight")
    body = required(body)
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
    parsed_filter = (
        parse_search({"query": without_nested(dsl_filter, NESTED_PATHS[LONG_TERM]), "size": 0}) if dsl_filter else None
    )
    return LongTermSearchInput(query, k, tuple(terms), min_score, parsed_filter, **weights)


@dataclass(frozen=True, slots=True)
class SessionInput:
    """A create-session body, checked.  Its fields are refused (``refused``) only after the container is found
    and takes sessions, as before the body was parsed at the route."""

    session_id: str | None = None
    summary: str | None = None
    namespace: dict[str, str] | None = None
    metadata: JsonObject | None = None
    agents: JsonObject | None = None
    additional_info: JsonObject | None = None
    refused: ServiceError | None = None


def parse_session(body: Body) -> SessionInput:
    body = required(body)
    try:
        chosen = text(body, "session_id")
        return SessionInput(
            check_session_id(chosen, "session_id") if chosen else None,
            namespace=string_map(body, "namespace") or None,
            summary=text(body, "summary"),
            metadata=obj(body, "metadata"),
            agents=obj(body, "agents"),
            additional_info=obj(body, "additional_info"),
        )
    except ServiceError as refusal:
        return SessionInput(refused=refusal)


@dataclass(frozen=True, slots=True)
class MemoryUpdate:
    """A memory's update, checked for its type (AGENTIC.md 4.4).  Its fields are refused (``refused``) only
    after the memory is found, as before the body was parsed at the route."""

    memory_type: str
    #: The fields written, in the body's order (None: removed).
    fields: JsonObject
    #: It changes a field that moves ``last_updated_time``.
    bumps: bool = False
    refused: ServiceError | None = None


def parse_memory_update(raw_type: str, body: Any, retention_enabled: bool) -> MemoryUpdate:
    """An update's body for a ``raw_type`` memory; ``pinned`` is refused while retention is off."""
    if not isinstance(body, dict) or not body:
        raise InvalidArgument("Text cannot be null or empty")
    memory_type = parse_memory_type(raw_type)
    if memory_type == HISTORY:
        raise StatusNotFound("Can't update memory history")
    changes = {key: body[key] for key in UPDATABLE[memory_type] if key in body}
    try:
        fields = _update_fields(memory_type, body, changes, retention_enabled)
    except ServiceError as refusal:
        return MemoryUpdate(memory_type, {}, refused=refusal)
    return MemoryUpdate(memory_type, fields, any(key in changes for key in BUMPS[memory_type]))


def _update_fields(
    memory_type: str, body: Mapping[str, Any], changes: Mapping[str, Any], retention_enabled: bool
) -> JsonObject:
    fields: JsonObject = {}
    if "pinned" in body:
        if not retention_enabled:
            raise StatusForbidden(PINNED_DISABLED)
        if memory_type == WORKING:
            raise StatusBadRequest(PINNED_WORKING, parameter="pinned")
        fields["pinned"] = boolean(changes, "pinned")
    if memory_type == LONG_TERM and "memory" in changes:
        memory = text(changes, "memory")
        if not memory or not memory.strip():
            raise InvalidArgument("[memory] cannot be null or empty", parameter="memory")
        fields["memory"] = memory
    if memory_type == WORKING and "messages" in changes:
        fields["messages"] = parse_messages(changes)
    for key in ("summary", "binary_data"):
        if key in changes:
            fields[key] = text(changes, key)
    for key in ("metadata", "agents", "additional_info", "structured_data", "structured_data_blob"):
        if key in changes and not (key == "metadata" and memory_type == WORKING):
            fields[key] = obj(changes, key)
    for key in ("tags",) + (("metadata",) if memory_type == WORKING else ()):
        if key in changes:
            fields[key] = string_map(changes, key)
    return fields


@dataclass(frozen=True, slots=True)
class DeleteByQueryInput:
    """A delete by query over one memory type: its query, parsed."""

    memory_type: str
    query: SearchBody


def parse_delete_by_query(raw_type: str, body: Body) -> DeleteByQueryInput:
    memory_type = parse_memory_type(raw_type)
    if body is None or body.get("query") is None:
        raise InvalidArgument(
            "Query parameter is required for delete by query operation. "
            'To delete all memories, use {"query": {"match_all": {}}}'
        )
    query = parse_search({"query": without_nested(body["query"], NESTED_PATHS[memory_type]), "size": 0})
    return DeleteByQueryInput(memory_type, query)


def parse_memory_search(raw_type: str, body: Body) -> SearchBody:
    """A memories ``_search`` body over one type (named as the path names it; checked by the service)."""
    if body is None:
        raise InvalidArgument("Search memories request has empty body")
    return parse_search(without_nested(body, NESTED_PATHS.get(raw_type.lower(), frozenset())))
