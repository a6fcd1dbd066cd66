"""Request validation of the agentic memory API: JSON field readers with ml-commons' own error strings, and
the container and message documents built from a request."""

from __future__ import annotations

import json
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from memory_plugin.agentic.models import (
    DEFAULT_PREFIX,
    EMBEDDING_TYPES,
    LONG_TERM,
    MAX_DIMENSION,
    MAX_INFER_SIZE_DEFAULT,
    MAX_INFER_SIZE_LIMIT,
    MAX_K,
    MAX_SEARCH_TERMS,
    OWNER_ROLES,
    STRATEGY_TYPES,
    check_session_id,
    flat_object_terms,
    now_millis,
)
from memory_plugin.agentic.retention_policy import PINNED_WORKING, checked_policy, merged_policy, stored
from memory_plugin.agentic.stores.opensearch_documents import NESTED_PATHS
from memory_plugin.auth import backend_role_error
from memory_plugin.dsl import SearchBody, parse_search
from memory_plugin.errors import (
    ContentParseError,
    InvalidArgument,
    ParseFailure,
    QueryShardFailure,
    StatusBadRequest,
    StatusNotFound,
)

T = TypeVar("T")

#: A request's JSON object body; None when the request had none.
Body = Mapping[str, Any] | None

_INDEX_NAME_FORBIDDEN = set('\\/*?"<>| ,#:')


def required(body: Body) -> Mapping[str, Any]:
    if body is None:
        raise InvalidArgument("Request body is required")
    return body


def without_nested(query: Any, nested: frozenset[str]) -> Any:
    """``nested`` queries evaluate their inner query (objects of an array are matched as one flattened doc).

    Only an inner query that is an object is unwrapped: a ``nested`` without one stays, for the parser's 400
    (unwrapped, ``"query": null`` would read as no query, and a delete by query would delete everything).
    A path that is not one of the index's ``nested`` objects is refused as the shard refuses it (matching
    every document instead deleted them all by query), or matches nothing with ``ignore_unmapped``."""
    if isinstance(query, dict):
        if (
            set(query) == {"nested"}
            and isinstance(query["nested"], dict)
            and isinstance(query["nested"].get("query"), dict)
        ):
            path = query["nested"].get("path")
            if isinstance(path, str) and path not in nested:
                if query["nested"].get("ignore_unmapped") is True:
                    return {"match_none": {}}
                raise QueryShardFailure(f"[nested] failed to find nested object under path [{path}]")
            return without_nested(query["nested"]["query"], nested)
        return {key: without_nested(value, nested) for key, value in query.items()}
    if isinstance(query, list):
        return [without_nested(item, nested) for item in query]
    return query


# -- JSON field readers ---------------------------------------------------------------


def _kind(value: Any) -> str:
    return {
        bool: "VALUE_BOOLEAN",
        int: "VALUE_NUMBER",
        float: "VALUE_NUMBER",
        dict: "START_OBJECT",
        list: "START_ARRAY",
        str: "VALUE_STRING",
    }.get(type(value), "VALUE_NULL")


def _of_type(body: Mapping[str, Any], name: str, kind: type[T], expected: str) -> T | None:
    value = body.get(name)
    if value is None:
        return None
    if not isinstance(value, kind):
        raise ContentParseError(f"[{name}] must be {expected}, found [{_kind(value)}]", parameter=name)
    return value


def text(body: Mapping[str, Any], name: str) -> str | None:
    return _of_type(body, name, str, "a string")


def boolean(body: Mapping[str, Any], name: str, default: bool | None = None) -> bool | None:
    value = body.get(name)
    if value is None:
        return default
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    if not isinstance(value, bool):
        raise ContentParseError(f"[{name}] must be a boolean, found [{_kind(value)}]", parameter=name)
    return value


def integer(body: Mapping[str, Any], name: str) -> int | None:
    value = body.get(name)
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or (isinstance(value, float) and not value.is_integer())
    ):
        raise ContentParseError(f"[{name}] must be an integer, found [{_kind(value)}]", parameter=name)
    if not -(2**31) <= value < 2**31:
        raise ContentParseError(f"[{name}] is out of range for an int: [{value}]", parameter=name)
    return int(value)


def number(body: Mapping[str, Any], name: str) -> float | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value or abs(value) == float("inf"):
        raise ContentParseError(f"[{name}] must be a finite number, found [{_kind(value)}]", parameter=name)
    return float(value)


def obj(body: Mapping[str, Any], name: str) -> dict[str, Any] | None:
    return _of_type(body, name, dict, "an object")


def string_map(body: Mapping[str, Any], name: str) -> dict[str, str] | None:
    """A flat string map; other values are stringified as ml-commons does (objects as compact JSON)."""
    value = obj(body, name)
    if value is None:
        return None
    out: dict[str, str] = {}
    for key, item in value.items():
        if item is None:
            continue
        if isinstance(item, str):
            out[key] = item
        elif isinstance(item, bool):
            out[key] = "true" if item else "false"
        elif isinstance(item, int | float):
            out[key] = str(item)
        else:
            out[key] = json.dumps(item, separators=(",", ":"), ensure_ascii=False)
    return out


def string_list(body: Mapping[str, Any], name: str) -> list[str] | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ContentParseError(f"[{name}] must be an array of strings", parameter=name)
    return list(value)


# -- containers -----------------------------------------------------------------------


def check_backend_roles(roles: list[str] | None) -> list[str] | None:
    """ml-commons' ``validateBackendRoles``: its refusal is an ``OpenSearchParseException`` (400 ``parse_exception``)."""
    for role in roles or ():
        refusal = backend_role_error(role)
        if refusal is not None:
            raise ParseFailure(refusal, parameter="backend_roles")
    return roles


def check_index_prefix(prefix: str) -> str:
    bad = not prefix or prefix != prefix.lower() or prefix.startswith(("_", "-", "+")) or prefix in (".", "..")
    if bad or any(c in _INDEX_NAME_FORBIDDEN for c in prefix) or len(prefix.encode()) > 200:
        raise ParseFailure(
            f'Invalid index_prefix [{prefix}]: it must be a lowercase index name without spaces or \\/*?"<>|,#:',
            parameter="index_prefix",
        )
    return prefix


def new_strategy_id(strategy_type: str) -> str:
    return f"{strategy_type.lower()}_{secrets.token_hex(4)}"


def parse_strategy(raw: Any, *, keep_id: bool = False) -> dict[str, Any]:
    """One strategy: type upper-cased, namespace key names, enabled, optional configuration."""
    if not isinstance(raw, dict):
        raise ContentParseError("[strategies] must be an array of objects", parameter="strategies")
    raw_type = text(raw, "type")
    if raw_type is None or raw_type.upper() not in STRATEGY_TYPES:
        raise InvalidArgument(
            f"Invalid memory type: {raw_type}. Must be SEMANTIC, USER_PREFERENCE, or SUMMARY", parameter="type"
        )
    namespace = string_list(raw, "namespace")
    if not namespace:
        raise InvalidArgument(
            "Strategy namespace is required. Please provide a non-empty array of namespace keys "
            '(for example ["user_id"]).',
            parameter="namespace",
        )
    strategy: dict[str, Any] = {}
    strategy_id = text(raw, "id")
    if strategy_id and keep_id:
        strategy["id"] = strategy_id
    strategy["enabled"] = boolean(raw, "enabled", True)
    strategy["type"] = raw_type.upper()
    strategy["namespace"] = namespace
    configuration = obj(raw, "configuration")
    if configuration:
        for key in ("llm_id", "llm_result_path", "system_prompt"):
            text(configuration, key)
        strategy["configuration"] = configuration
    return strategy


def parse_embedding(config: Mapping[str, Any], model_dimension: int | None) -> dict[str, Any]:
    """The embedding fields.  ``model_dimension`` is the built-in model's, which the container's must match;
    None when ``embedding_model_id`` names the owner's registered remote model, whose dimension the
    container declares (as on ml-commons, where it sizes the knn_vector field)."""
    model_type = text(config, "embedding_model_type")
    model_id = text(config, "embedding_model_id")
    dimension = integer(config, "embedding_dimension")
    if model_type is None and model_id is None:
        if dimension is not None:
            raise InvalidArgument("Field embedding_dimension is not allowed when semantic storage is disabled")
        return {}
    if model_type is not None and model_type.upper() not in EMBEDDING_TYPES:
        raise InvalidArgument("Wrong function name", parameter="embedding_model_type")
    if model_type is None:
        raise InvalidArgument("Embedding model type is required when embedding model ID is provided")
    if model_id is None:
        raise InvalidArgument("Embedding model ID is required when embedding model type is provided")
    model_type = model_type.upper()
    if model_type == "SPARSE_ENCODING":
        if dimension is not None:
            raise InvalidArgument("Dimension is not allowed for SPARSE_ENCODING")
        raise InvalidArgument(
            "SPARSE_ENCODING is not available here: long-term memories are embedded by TEXT_EMBEDDING models "
            "(the built-in one, or a registered remote one)",
            parameter="embedding_model_type",
        )
    if dimension is None:
        raise InvalidArgument("Dimension is required for TEXT_EMBEDDING")
    if model_dimension is None:
        if not 1 <= dimension <= MAX_DIMENSION:
            raise InvalidArgument(
                f"embedding_dimension must be between 1 and {MAX_DIMENSION}, the knn_vector limit",
                parameter="embedding_dimension",
            )
    elif dimension != model_dimension:
        raise InvalidArgument(
            f"embedding_dimension {dimension} does not match the built-in embedding model, "
            f"which has {model_dimension} dimensions; use {model_dimension} or configure model_dir",
            parameter="embedding_dimension",
        )
    return {"embedding_model_type": model_type, "embedding_model_id": model_id, "embedding_dimension": dimension}


def _check_strategies_need_models(config: Mapping[str, Any]) -> None:
    if config.get("strategies") and not (config.get("llm_id") and config.get("embedding_model_id")):
        raise InvalidArgument(
            "Strategies require both an LLM model and embedding model to be configured. "
            "Please provide llm_id, embedding_model_id and embedding_model_type in the configuration."
        )


def _max_infer_size(config: Mapping[str, Any]) -> int | None:
    size = integer(config, "max_infer_size")
    if size is not None and size > MAX_INFER_SIZE_LIMIT:
        raise InvalidArgument("Maximum infer size cannot exceed 10", parameter="max_infer_size")
    if size is not None and size < 1:
        raise InvalidArgument("Maximum infer size must be at least 1", parameter="max_infer_size")
    return size


def parse_configuration(raw: Any, model_dimension: int | None, retention_enabled: bool) -> dict[str, Any]:
    """A create request's ``configuration``, with ml-commons' defaults filled in."""
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ContentParseError("[configuration] must be an object", parameter="configuration")
    use_system_index = boolean(raw, "use_system_index", True)
    prefix = text(raw, "index_prefix")
    if prefix is None:
        prefix = DEFAULT_PREFIX if use_system_index else secrets.token_hex(4)
    config: dict[str, Any] = {"index_prefix": check_index_prefix(prefix)}
    config.update(parse_embedding(raw, model_dimension))
    llm_id = text(raw, "llm_id")
    max_infer_size = _max_infer_size(raw)
    if llm_id:
        config["llm_id"] = llm_id
        config["max_infer_size"] = max_infer_size or MAX_INFER_SIZE_DEFAULT
    strategies = raw.get("strategies")
    if strategies is not None and not isinstance(strategies, list):
        raise ContentParseError("[strategies] must be an array", parameter="strategies")
    config["strategies"] = []
    for item in strategies or ():
        strategy = parse_strategy(item)
        config["strategies"].append({"id": new_strategy_id(strategy["type"]), **strategy})
    config["disable_history"] = boolean(raw, "disable_history", False)
    config["disable_session"] = boolean(raw, "disable_session", False)
    config["use_system_index"] = use_system_index
    for name in ("index_settings", "parameters"):
        value = obj(raw, name)
        if value:
            config[name] = value
    if "retention_policy" in raw:
        policy = checked_policy(raw["retention_policy"], retention_enabled)
        # An explicit null is the container's opt-out of cluster defaults, kept as ml-commons keeps it.
        config["retention_policy"] = None if policy is None else stored(policy)
    _check_strategies_need_models(config)
    return config


def new_container(
    body: Mapping[str, Any],
    model_dimension: int | None,
    retention_enabled: bool,
    owner_id: str,
    owner_roles: Sequence[str] = (),
) -> dict[str, Any]:
    """A new container; ``owner_roles``: the creator's backend roles, which ml-commons keeps in the container's
    user object (shown as ``owner.backend_roles``, ``views.container_view``)."""
    name = text(body, "name")
    if name is None:
        raise InvalidArgument("name is null", parameter="name")
    created = now_millis()
    doc: dict[str, Any] = {"name": name}
    description = text(body, "description")
    if description is not None:
        doc["description"] = description
    doc["owner"] = owner_id
    if owner_roles:
        doc[OWNER_ROLES] = list(owner_roles)
    doc["created_time"] = created
    doc["last_updated_time"] = created
    doc["configuration"] = parse_configuration(body.get("configuration"), model_dimension, retention_enabled)
    roles = check_backend_roles(string_list(body, "backend_roles"))
    if roles:
        doc["backend_roles"] = roles
    return doc


_EMBEDDING_FIELDS = ("embedding_model_type", "embedding_model_id", "embedding_dimension")


def updated_container(
    current: Mapping[str, Any], body: Mapping[str, Any], model_dimension: int | None, retention_enabled: bool
) -> dict[str, Any]:
    """A container after an update (AGENTIC.md 3.3): what may change is merged, the rest kept."""
    doc: dict[str, Any] = json.loads(json.dumps(current))
    for name in ("name", "description"):
        value = text(body, name)
        if value is not None:
            doc[name] = value
    if "backend_roles" in body:
        doc["backend_roles"] = check_backend_roles(string_list(body, "backend_roles")) or []
    raw = body.get("configuration")
    if raw is not None:
        if not isinstance(raw, dict):
            raise ContentParseError("[configuration] must be an object", parameter="configuration")
        config = doc["configuration"]
        if any(raw.get(name) is not None for name in _EMBEDDING_FIELDS):
            if config.get("strategies"):
                raise InvalidArgument(
                    "Cannot change embedding configuration once strategies are configured. "
                    "Create a new memory container to use another embedding model."
                )
            for name in _EMBEDDING_FIELDS:
                config.pop(name, None)
            config.update(parse_embedding(raw, model_dimension))
        llm_id = text(raw, "llm_id")
        if llm_id:
            config["llm_id"] = llm_id
        max_infer_size = _max_infer_size(raw)
        if max_infer_size is not None:
            config["max_infer_size"] = max_infer_size
        if config.get("llm_id"):
            config.setdefault("max_infer_size", MAX_INFER_SIZE_DEFAULT)
        if "retention_policy" in raw:
            policy = checked_policy(raw["retention_policy"], retention_enabled)
            config["retention_policy"] = (
                None if policy is None else merged_policy(config.get("retention_policy"), policy)
            )
        strategies = raw.get("strategies")
        if strategies is not None:
            if not isinstance(strategies, list):
                raise ContentParseError("[strategies] must be an array", parameter="strategies")
            config["strategies"] = _merge_strategies(config.get("strategies", []), strategies)
        _check_strategies_need_models(config)
    doc["last_updated_time"] = now_millis()
    return doc


def _merge_strategies(current: list[dict[str, Any]], updates: list[Any]) -> list[dict[str, Any]]:
    merged = [dict(strategy) for strategy in current]
    by_id = {strategy["id"]: strategy for strategy in merged}
    for raw in updates:
        if isinstance(raw, dict) and raw.get("id") is not None:
            strategy_id = text(raw, "id")
            existing = by_id.get(strategy_id or "")
            if existing is None:
                raise StatusNotFound(f"Strategy with id {strategy_id} not found")
            if raw.get("type") is not None and str(raw["type"]).upper() != existing["type"]:
                raise InvalidArgument(
                    f"Cannot change the type of strategy {strategy_id} from {existing['type']} to {raw['type']}"
                )
            parsed = parse_strategy({"type": existing["type"], "namespace": existing["namespace"], **raw})
            existing["enabled"] = parsed["enabled"] if "enabled" in raw else existing.get("enabled", True)
            existing["namespace"] = parsed["namespace"]
            if "configuration" in raw:
                if parsed.get("configuration"):
                    existing["configuration"] = parsed["configuration"]
                else:
                    existing.pop("configuration", None)
        else:
            strategy = parse_strategy(raw)
            merged.append({"id": new_strategy_id(strategy["type"]), **strategy})
    return merged


# -- memories --------------------------------------------------------------------------


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
