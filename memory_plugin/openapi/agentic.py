"""Agentic memory (ML Commons 3.3+): containers, sessions and typed memories."""

from __future__ import annotations

from memory_plugin.agentic.models import BASE as AGENTIC_BASE
from memory_plugin.agentic.models import MAX_K
from memory_plugin.openapi.shapes import (
    ANY_OBJECT,
    BOOLEAN,
    INTEGER,
    NUMBER,
    STRING,
    STRING_MAP,
    WEIGHT,
    Api,
    Schema,
    array,
    each,
    json_object,
    path_param,
    query_param,
    ref,
)

AGENTIC = Api("agentic memory 3.3+", ("400", "401", "403", "404"))


MEMORY_TYPE = {
    "name": "memory_type",
    "in": "path",
    "required": True,
    "schema": {"type": "string", "enum": ["sessions", "working", "long-term", "history"]},
}


def agentic_operations() -> Schema:
    strategy = json_object(
        {
            "id": STRING,
            "type": {"type": "string", "enum": ["SEMANTIC", "USER_PREFERENCE", "SUMMARY"]},
            "namespace": array(STRING, minItems=1),
            "enabled": BOOLEAN,
            "configuration": ANY_OBJECT,
        },
        required=("type", "namespace"),
    )
    configuration = json_object(
        {
            "embedding_model_type": {"type": "string", "enum": ["TEXT_EMBEDDING"]},
            "embedding_model_id": STRING,
            "embedding_dimension": INTEGER,
            "llm_id": STRING,
            "max_infer_size": {"type": "integer", "minimum": 1, "maximum": 10},
            "index_prefix": STRING,
            **each(BOOLEAN, "use_system_index", "disable_history", "disable_session"),
            **each(ANY_OBJECT, "index_settings", "parameters"),
            "strategies": array(strategy),
            "retention_policy": ANY_OBJECT,
        }
    )
    container = json_object(
        {
            **each(STRING, "name", "description"),
            "memory_container_id": {"type": "string", "pattern": "^[a-zA-Z0-9][a-zA-Z0-9_-]*$", "maxLength": 512},
            "backend_roles": array({"type": "string", "pattern": "^[\\p{L}\\p{N}:+=,.@_/-]+$", "maxLength": 128}),
            "configuration": configuration,
        }
    )
    message = json_object({"role": STRING, "content": array(ANY_OBJECT)}, required=("role", "content"))
    add = json_object(
        {
            "payload_type": {"type": "string", "enum": ["conversational", "data"]},
            "messages": array(message),
            **each(ANY_OBJECT, "structured_data", "structured_data_blob"),
            "binary_data": STRING,
            **each(STRING_MAP, "namespace", "metadata", "tags"),
            "infer": BOOLEAN,
            "parameters": ANY_OBJECT,
            "message_id": INTEGER,
            "checkpoint_id": STRING,
        }
    )
    session = json_object(
        {
            **each(STRING, "session_id", "summary"),
            **each(ANY_OBJECT, "metadata", "agents", "additional_info"),
            "namespace": STRING_MAP,
        }
    )
    semantic = {
        "query": {"type": "string", "minLength": 1},
        "k": {"type": "integer", "minimum": 1, "maximum": MAX_K},
        **each(STRING_MAP, "namespace", "tags"),
        "min_score": NUMBER,
        "filter": ANY_OBJECT,
    }
    hybrid = {**semantic, **each(WEIGHT, "bm25_weight", "neural_weight")}
    write = json_object({**each(STRING, "_index", "_id"), "_version": INTEGER, "result": STRING})
    search = ref("SearchResponse")
    container_search = AGENTIC.op(
        "Search the caller's memory containers", search, ref("SearchBody"), body_required=False
    )
    memory_search = AGENTIC.op(
        "Search memories of a type (the container and owner filters are always added)", search, ref("SearchBody")
    )
    semantic_search = AGENTIC.op(
        "k-NN search over long-term memory", search, json_object(semantic, required=("query",))
    )
    hybrid_search = AGENTIC.op(
        "Hybrid search: BM25 and k-NN, min-max normalised, weighted arithmetic mean",
        search,
        json_object(hybrid, required=("query",)),
    )
    delete_params = [
        query_param("delete_all_memories", BOOLEAN),
        query_param("delete_memories", STRING, description="comma-separated memory types"),
    ]
    container_path = [path_param("memory_container_id")]
    typed_path = [*container_path, MEMORY_TYPE]
    typed = AGENTIC_BASE + "/{memory_container_id}/memories/{memory_type}"
    return {
        AGENTIC_BASE + "/_create": {
            "post": AGENTIC.op(
                "Create a memory container (3.9: with a memory_container_id of the caller's choosing)",
                json_object(each(STRING, "memory_container_id", "status")),
                container,
                errors=(*AGENTIC.errors, "409"),
            )
        },
        AGENTIC_BASE + "/_retention/_execute": {
            "post": AGENTIC.op(
                "Run memory retention over the caller's containers (3.9; no body)",
                json_object({**each(BOOLEAN, "acknowledged", "triggered"), **each(STRING, "status", "message")}),
            )
        },
        AGENTIC_BASE + "/_retention/_dry_run": {
            "post": AGENTIC.op("What retention would delete in each of the caller's containers (3.9)", ANY_OBJECT)
        },
        AGENTIC_BASE + "/{memory_container_id}/_retention/_dry_run": {
            "parameters": container_path,
            "post": AGENTIC.op("What retention would delete in one container (3.9)", ANY_OBJECT),
        },
        AGENTIC_BASE + "/_search": {"get": container_search, "post": container_search},
        AGENTIC_BASE + "/{memory_container_id}": {
            "parameters": container_path,
            "get": AGENTIC.op("Get a memory container", ANY_OBJECT),
            "put": AGENTIC.op("Update a memory container", write, container),
            "delete": AGENTIC.op(
                "Delete a memory container with its memories",
                write,
                errors=(*AGENTIC.errors, "409"),
                parameters=delete_params,
            ),
        },
        AGENTIC_BASE + "/{memory_container_id}/memories": {
            "parameters": container_path,
            "post": AGENTIC.op(
                "Add working memory (infer=true extracts long-term memory in the background)",
                json_object(each(STRING, "session_id", "working_memory_id")),
                add,
            ),
        },
        AGENTIC_BASE + "/{memory_container_id}/memories/sessions": {
            "parameters": container_path,
            "post": AGENTIC.op("Create a session", json_object(each(STRING, "session_id", "status")), session),
        },
        typed + "/_search": {"parameters": typed_path, "get": memory_search, "post": memory_search},
        typed + "/_delete_by_query": {
            "parameters": typed_path,
            "post": AGENTIC.op(
                "Delete memories of a type by query",
                ANY_OBJECT,
                json_object({"query": ANY_OBJECT}, required=("query",)),
            ),
        },
        typed + "/_semantic_search": {"parameters": typed_path, "get": semantic_search, "post": semantic_search},
        typed + "/_hybrid_search": {"parameters": typed_path, "get": hybrid_search, "post": hybrid_search},
        typed + "/{memory_id}": {
            "parameters": [*typed_path, path_param("memory_id")],
            "get": AGENTIC.op(
                "Get one memory",
                ANY_OBJECT,
                parameters=[
                    query_param(
                        "sources",
                        BOOLEAN,
                        description="long-term and history: add the working memories it came from (`memory_sources`)",
                    )
                ],
            ),
            "put": AGENTIC.op(
                "Update one memory (allowed keys depend on the type)", write, json_object(minProperties=1)
            ),
            "delete": AGENTIC.op(
                "Delete one memory; working memory and sessions forget what was inferred from them",
                write,
                parameters=[
                    query_param("report", BOOLEAN, description="add the erasure report (`forgotten`) to the answer")
                ],
            ),
        },
    }
