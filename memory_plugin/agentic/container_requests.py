"""Container requests of the agentic memory API: a create or update body checked field by field in
ml-commons' order, and the container document built from it."""

from __future__ import annotations

import json
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from memory_plugin.agentic.container_ids import custom_container_id
from memory_plugin.agentic.models import (
    DEFAULT_PREFIX,
    EMBEDDING_TYPES,
    MAX_DIMENSION,
    MAX_INFER_SIZE_DEFAULT,
    MAX_INFER_SIZE_LIMIT,
    OWNER_ROLES,
    STRATEGY_TYPES,
    now_millis,
    parse_memory_type,
)
from memory_plugin.agentic.requests import (
    Body,
    JsonObject,
    boolean,
    integer,
    obj,
    required,
    string_list,
    text,
    without_nested,
)
from memory_plugin.agentic.retention_policy import checked_policy, merged_policy, stored
from memory_plugin.agentic.stores.opensearch_documents import NESTED_PATHS
from memory_plugin.auth import backend_role_error
from memory_plugin.dsl import SearchBody, parse_search
from memory_plugin.errors import ContentParseError, InvalidArgument, ParseFailure, ServiceError, StatusNotFound

_INDEX_NAME_FORBIDDEN = set('\\/*?"<>| ,#:')


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


@dataclass(frozen=True, slots=True)
class EmbeddingInput:
    """A container's embedding model, checked but for its dimension, which depends on the model it names."""

    model_type: str
    model_id: str
    dimension: int

    def check(self, model_dimension: int | None) -> None:
        """``model_dimension`` is the built-in model's, which the container's must match; None when
        ``embedding_model_id`` names the owner's registered remote model, whose dimension the container
        declares (as on ml-commons, where it sizes the knn_vector field)."""
        if model_dimension is None:
            if not 1 <= self.dimension <= MAX_DIMENSION:
                raise InvalidArgument(
                    f"embedding_dimension must be between 1 and {MAX_DIMENSION}, the knn_vector limit",
                    parameter="embedding_dimension",
                )
        elif self.dimension != model_dimension:
            raise InvalidArgument(
                f"embedding_dimension {self.dimension} does not match the built-in embedding model, "
                f"which has {model_dimension} dimensions; use {model_dimension} or configure model_dir",
                parameter="embedding_dimension",
            )

    def fields(self) -> dict[str, str | int]:
        return {
            "embedding_model_type": self.model_type,
            "embedding_model_id": self.model_id,
            "embedding_dimension": self.dimension,
        }


def parse_embedding(config: Mapping[str, Any]) -> EmbeddingInput | None:
    """The embedding fields, checked in ml-commons' order; None when semantic storage is off."""
    model_type = text(config, "embedding_model_type")
    model_id = text(config, "embedding_model_id")
    dimension = integer(config, "embedding_dimension")
    if model_type is None and model_id is None:
        if dimension is not None:
            raise InvalidArgument("Field embedding_dimension is not allowed when semantic storage is disabled")
        return None
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
    return EmbeddingInput(model_type, model_id, dimension)


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


@dataclass(frozen=True, slots=True)
class ContainerInput:
    """A create request's body, checked (ml-commons' ``MLCreateMemoryContainerInput``), with ml-commons'
    defaults filled in.  The embedding's dimension is checked against the model by the service; a field after
    the embedding that the parse refused (``refused``) is raised after that check, so that a body with
    several faults is answered as ml-commons' field order has it."""

    name: str
    description: str | None
    #: ``configuration`` without the embedding fields, in the key order it is stored in.
    before_embedding: JsonObject
    embedding: EmbeddingInput | None
    after_embedding: JsonObject
    backend_roles: list[str] | None = None
    custom_id: str | None = None
    refused: ServiceError | None = None

    def document(self, model_dimension: int | None, owner_id: str, owner_roles: Sequence[str] = ()) -> JsonObject:
        """The new container's document; ``owner_roles``: the creator's backend roles, which ml-commons keeps in
        the container's user object (shown as ``owner.backend_roles``, ``views.container_view``)."""
        if self.embedding is not None:
            self.embedding.check(model_dimension)
        if self.refused is not None:
            raise self.refused
        created = now_millis()
        doc: JsonObject = {"name": self.name}
        if self.description is not None:
            doc["description"] = self.description
        doc["owner"] = owner_id
        if owner_roles:
            doc[OWNER_ROLES] = list(owner_roles)
        doc["created_time"] = created
        doc["last_updated_time"] = created
        embedding = self.embedding.fields() if self.embedding is not None else {}
        strategies = [{"id": new_strategy_id(s["type"]), **s} for s in self.after_embedding["strategies"]]
        doc["configuration"] = {
            **self.before_embedding,
            **embedding,
            **self.after_embedding,
            "strategies": strategies,
        }
        if self.backend_roles:
            doc["backend_roles"] = self.backend_roles
        return doc


def _after_embedding(raw: Mapping[str, Any], use_system_index: bool, retention_enabled: bool) -> JsonObject:
    """The ``configuration`` fields after the embedding's; ``strategies`` hold no ids yet."""
    config: JsonObject = {}
    llm_id = text(raw, "llm_id")
    max_infer_size = _max_infer_size(raw)
    if llm_id:
        config["llm_id"] = llm_id
        config["max_infer_size"] = max_infer_size or MAX_INFER_SIZE_DEFAULT
    strategies = raw.get("strategies")
    if strategies is not None and not isinstance(strategies, list):
        raise ContentParseError("[strategies] must be an array", parameter="strategies")
    config["strategies"] = [parse_strategy(item) for item in strategies or ()]
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
    return config


def parse_container(body: Body, retention_enabled: bool) -> ContainerInput:
    """A create request's body, checked field by field in the order (and with the messages) ml-commons answers."""
    body = required(body)
    name = text(body, "name")
    if name is None:
        raise InvalidArgument("name is null", parameter="name")
    description = text(body, "description")
    raw = body.get("configuration")
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ContentParseError("[configuration] must be an object", parameter="configuration")
    use_system_index = bool(boolean(raw, "use_system_index", True))
    prefix = text(raw, "index_prefix")
    if prefix is None:
        prefix = DEFAULT_PREFIX if use_system_index else secrets.token_hex(4)
    before: JsonObject = {"index_prefix": check_index_prefix(prefix)}
    embedding = parse_embedding(raw)
    after: JsonObject = {"strategies": []}
    roles = custom_id = None
    try:
        after = _after_embedding(raw, use_system_index, retention_enabled)
        _check_strategies_need_models({**after, **(embedding.fields() if embedding else {})})
        roles = check_backend_roles(string_list(body, "backend_roles"))
        custom_id = custom_container_id(body)
    except ServiceError as refusal:
        return ContainerInput(name, description, before, embedding, after, refused=refusal)
    return ContainerInput(name, description, before, embedding, after, roles, custom_id)


def parse_container_search(body: Body) -> SearchBody:
    """A containers ``_search`` body, over the containers as ml-commons shows them (``views.container_view``)."""
    return parse_search(without_nested(body, NESTED_PATHS["container"]))


@dataclass(frozen=True, slots=True)
class ContainerDeletion:
    """What a container's delete also deletes: all its memory indices, or those of these types."""

    delete_all_memories: bool = False
    delete_memories: tuple[str, ...] = ()


def parse_container_deletion(options: Mapping[str, Any]) -> ContainerDeletion:
    """The delete's options, from its body and query string (``delete_memories``: a list or comma-separated)."""
    delete_all = boolean(options, "delete_all_memories", False) or False
    raw_types = options.get("delete_memories")
    if isinstance(raw_types, str):
        types = raw_types.split(",")
    elif isinstance(raw_types, list) and all(isinstance(item, str) for item in raw_types):
        types = raw_types
    elif raw_types is None:
        types = []
    else:
        raise InvalidArgument(
            "[delete_memories] must be a comma-separated list of memory types", parameter="delete_memories"
        )
    return ContainerDeletion(delete_all, tuple(parse_memory_type(name.strip()) for name in types if name.strip()))


_EMBEDDING_FIELDS = ("embedding_model_type", "embedding_model_id", "embedding_dimension")


@dataclass(frozen=True, slots=True)
class ConfigurationUpdate:
    """An update's ``configuration``, checked as far as it can be without the stored container."""

    #: The update names an embedding field (refused once the container has strategies).
    embedding_given: bool = False
    embedding: EmbeddingInput | None = None
    #: The embedding fields' refusal, raised after the stored container's own check.
    embedding_refused: ServiceError | None = None
    llm_id: str | None = None
    max_infer_size: int | None = None
    retention_given: bool = False
    retention_policy: dict[str, dict[str, int | None]] | None = None
    #: The strategies to change (by ``id``) or add: each is checked against the stored one it names.
    strategies: list[Any] | None = None
    #: A refusal of a field after the embedding's, raised after the embedding is checked.
    refused: ServiceError | None = None


@dataclass(frozen=True, slots=True)
class ContainerUpdate:
    """An update's body, checked (AGENTIC.md 3.3).  Its refusals are kept (``refused``) and raised by
    ``updated_container`` once the container is found, in the order the checks that need the stored container
    interleave with them, so that a container the caller may not use is a 404 first."""

    name: str | None = None
    description: str | None = None
    #: None: not given; ``[]``: cleared.
    backend_roles: list[str] | None = None
    configuration: ConfigurationUpdate | None = None
    refused: ServiceError | None = None

    @property
    def embedding_model_id(self) -> str | None:
        embedding = self.configuration.embedding if self.configuration is not None else None
        return embedding.model_id if embedding is not None else None


def _configuration_update(raw: Mapping[str, Any], retention_enabled: bool) -> ConfigurationUpdate:
    given = any(raw.get(name) is not None for name in _EMBEDDING_FIELDS)
    embedding, embedding_refused = None, None
    if given:
        try:
            embedding = parse_embedding(raw)
        except ServiceError as refusal:
            embedding_refused = refusal
    try:
        llm_id, max_infer_size = text(raw, "llm_id"), _max_infer_size(raw)
        policy = checked_policy(raw["retention_policy"], retention_enabled) if "retention_policy" in raw else None
        strategies = raw.get("strategies")
        if strategies is not None and not isinstance(strategies, list):
            raise ContentParseError("[strategies] must be an array", parameter="strategies")
    except ServiceError as refusal:
        return ConfigurationUpdate(given, embedding, embedding_refused, refused=refusal)
    return ConfigurationUpdate(
        given, embedding, embedding_refused, llm_id, max_infer_size, "retention_policy" in raw, policy, strategies
    )


def parse_container_update(body: Body, retention_enabled: bool) -> ContainerUpdate:
    """An update's body; only a missing body is refused here, before the container is looked up."""
    body = required(body)
    try:
        name, description = text(body, "name"), text(body, "description")
        roles = None
        if "backend_roles" in body:
            roles = check_backend_roles(string_list(body, "backend_roles")) or []
        raw = body.get("configuration")
        if raw is not None and not isinstance(raw, dict):
            raise ContentParseError("[configuration] must be an object", parameter="configuration")
    except ServiceError as refusal:
        return ContainerUpdate(refused=refusal)
    configuration = _configuration_update(raw, retention_enabled) if raw is not None else None
    return ContainerUpdate(name, description, roles, configuration)


def updated_container(current: Mapping[str, Any], update: ContainerUpdate, model_dimension: int | None) -> JsonObject:
    """A container after an update (AGENTIC.md 3.3): what may change is merged, the rest kept."""
    if update.refused is not None:
        raise update.refused
    doc: JsonObject = json.loads(json.dumps(current))
    for name, value in (("name", update.name), ("description", update.description)):
        if value is not None:
            doc[name] = value
    if update.backend_roles is not None:
        doc["backend_roles"] = update.backend_roles
    change = update.configuration
    if change is not None:
        config = doc["configuration"]
        if change.embedding_given:
            if config.get("strategies"):
                raise InvalidArgument(
                    "Cannot change embedding configuration once strategies are configured. "
                    "Create a new memory container to use another embedding model."
                )
            if change.embedding_refused is not None:
                raise change.embedding_refused
            for name in _EMBEDDING_FIELDS:
                config.pop(name, None)
            if change.embedding is not None:
                change.embedding.check(model_dimension)
                config.update(change.embedding.fields())
        if change.refused is not None:
            raise change.refused
        if change.llm_id:
            config["llm_id"] = change.llm_id
        if change.max_infer_size is not None:
            config["max_infer_size"] = change.max_infer_size
        if config.get("llm_id"):
            config.setdefault("max_infer_size", MAX_INFER_SIZE_DEFAULT)
        if change.retention_given:
            policy = change.retention_policy
            config["retention_policy"] = (
                None if policy is None else merged_policy(config.get("retention_policy"), policy)
            )
        if change.strategies is not None:
            config["strategies"] = _merge_strategies(config.get("strategies", []), change.strategies)
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
