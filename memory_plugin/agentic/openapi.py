"""The OpenAPI description of the agentic memory paths (merged into ``memory_plugin.openapi``)."""

from __future__ import annotations

from typing import Any

from memory_plugin.agentic.models import BASE, MAX_K
from memory_plugin.openapi import _body, _errors, _ok, _path_param, _query, _ref

TAG = ["agentic memory 3.3+"]
ERRORS = ("400", "401", "403", "404")
ANY_OBJECT = {"type": "object"}
STRING_MAP = {"type": "object", "additionalProperties": {"type": "string"}}
MEMORY_TYPE = {"name": "memory_type", "in": "path", "required": True,
               "schema": {"type": "string", "enum": ["sessions", "working", "long-term", "history"]}}


def _op(summary: str, response: dict[str, Any], body: dict[str, Any] | None = None, required: bool = True,
        errors: tuple[str, ...] = ERRORS, **extra: Any) -> dict[str, Any]:
    operation: dict[str, Any] = {"tags": TAG, "summary": summary, **extra}
    if body is not None:
        operation["requestBody"] = _body(body, required=required)
    operation["responses"] = {**_ok(response), **_errors("opensearch", *errors)}
    return operation


def agentic_operations() -> dict[str, Any]:
    strategy = {"type": "object", "required": ["type", "namespace"], "properties": {
        "id": {"type": "string"}, "type": {"type": "string", "enum": ["SEMANTIC", "USER_PREFERENCE", "SUMMARY"]},
        "namespace": {"type": "array", "items": {"type": "string"}, "minItems": 1}, "enabled": {"type": "boolean"},
        "configuration": ANY_OBJECT}}
    configuration = {"type": "object", "properties": {
        "embedding_model_type": {"type": "string", "enum": ["TEXT_EMBEDDING"]}, "embedding_model_id": {"type": "string"},
        "embedding_dimension": {"type": "integer"}, "llm_id": {"type": "string"},
        "max_infer_size": {"type": "integer", "minimum": 1, "maximum": 10}, "index_prefix": {"type": "string"},
        "use_system_index": {"type": "boolean"}, "disable_history": {"type": "boolean"}, "disable_session": {"type": "boolean"},
        "index_settings": ANY_OBJECT, "parameters": ANY_OBJECT, "strategies": {"type": "array", "items": strategy},
        "retention_policy": ANY_OBJECT}}
    container = {"type": "object", "properties": {
        "name": {"type": "string"}, "description": {"type": "string"},
        "backend_roles": {"type": "array", "items": {"type": "string", "pattern": "^[A-Za-z0-9:+=,.@_/-]{1,128}$"}},
        "configuration": configuration}}
    message = {"type": "object", "required": ["role", "content"], "properties": {
        "role": {"type": "string"}, "content": {"type": "array", "items": ANY_OBJECT}}}
    add = {"type": "object", "properties": {
        "payload_type": {"type": "string", "enum": ["conversational", "data"]},
        "messages": {"type": "array", "items": message}, "structured_data": ANY_OBJECT, "structured_data_blob": ANY_OBJECT,
        "binary_data": {"type": "string"}, "namespace": STRING_MAP, "metadata": STRING_MAP, "tags": STRING_MAP,
        "infer": {"type": "boolean"}, "parameters": ANY_OBJECT, "message_id": {"type": "integer"},
        "checkpoint_id": {"type": "string"}}}
    session = {"type": "object", "properties": {
        "session_id": {"type": "string"}, "summary": {"type": "string"}, "metadata": ANY_OBJECT, "agents": ANY_OBJECT,
        "additional_info": ANY_OBJECT, "namespace": STRING_MAP}}
    semantic: dict[str, Any] = {"type": "object", "required": ["query"], "properties": {
        "query": {"type": "string", "minLength": 1}, "k": {"type": "integer", "minimum": 1, "maximum": MAX_K},
        "namespace": STRING_MAP, "tags": STRING_MAP, "min_score": {"type": "number"}, "filter": ANY_OBJECT}}
    hybrid = {**semantic, "properties": {**semantic["properties"],
                                         "bm25_weight": {"type": "number", "minimum": 0, "maximum": 1},
                                         "neural_weight": {"type": "number", "minimum": 0, "maximum": 1}}}
    write = {"type": "object", "properties": {"_index": {"type": "string"}, "_id": {"type": "string"},
                                              "_version": {"type": "integer"}, "result": {"type": "string"}}}
    search = _ref("SearchResponse")
    search_body = _ref("SearchBody")
    cid = _path_param("memory_container_id")
    typed = [cid, MEMORY_TYPE]
    container_search = _op("Search the caller's memory containers", search, search_body, required=False)
    memory_search = _op("Search memories of a type (the container and owner filters are always added)", search, search_body)
    semantic_op = _op("k-NN search over long-term memory", search, semantic)
    hybrid_op = _op("Hybrid search: BM25 and k-NN, min-max normalised, weighted arithmetic mean", search, hybrid)
    delete_params = [_query("delete_all_memories", {"type": "boolean"}),
                     _query("delete_memories", {"type": "string"}, description="comma-separated memory types")]
    return {
        BASE + "/_create": {"post": _op("Create a memory container", {"type": "object", "properties": {
            "memory_container_id": {"type": "string"}, "status": {"type": "string"}}}, container)},
        BASE + "/_search": {"get": container_search, "post": container_search},
        BASE + "/{memory_container_id}": {
            "parameters": [cid],
            "get": _op("Get a memory container", ANY_OBJECT),
            "put": _op("Update a memory container", write, container),
            "delete": _op("Delete a memory container with its memories", write, errors=(*ERRORS, "409"),
                          parameters=delete_params),
        },
        BASE + "/{memory_container_id}/memories": {
            "parameters": [cid],
            "post": _op("Add working memory (infer=true extracts long-term memory in the background)", {
                "type": "object", "properties": {"session_id": {"type": "string"}, "working_memory_id": {"type": "string"}}}, add),
        },
        BASE + "/{memory_container_id}/memories/sessions": {
            "parameters": [cid],
            "post": _op("Create a session", {"type": "object", "properties": {
                "session_id": {"type": "string"}, "status": {"type": "string"}}}, session),
        },
        BASE + "/{memory_container_id}/memories/{memory_type}/_search": {
            "parameters": typed, "get": memory_search, "post": memory_search},
        BASE + "/{memory_container_id}/memories/{memory_type}/_delete_by_query": {
            "parameters": typed,
            "post": _op("Delete memories of a type by query", ANY_OBJECT, {"type": "object", "required": ["query"],
                                                                             "properties": {"query": ANY_OBJECT}}),
        },
        BASE + "/{memory_container_id}/memories/{memory_type}/_semantic_search": {
            "parameters": typed, "get": semantic_op, "post": semantic_op},
        BASE + "/{memory_container_id}/memories/{memory_type}/_hybrid_search": {
            "parameters": typed, "get": hybrid_op, "post": hybrid_op},
        BASE + "/{memory_container_id}/memories/{memory_type}/{memory_id}": {
            "parameters": [*typed, _path_param("memory_id")],
            "get": _op("Get one memory", ANY_OBJECT),
            "put": _op("Update one memory (allowed keys depend on the type)", write, {"type": "object", "minProperties": 1}),
            "delete": _op("Delete one memory", write),
        },
    }
