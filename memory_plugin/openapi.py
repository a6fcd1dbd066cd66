"""The OpenAPI 3.1 description of every endpoint, served at ``GET /_openapi.json``.

A test checks it against the router both ways, and schemathesis fuzzes the
live server from it, so it cannot drift from what the server does.
"""

from __future__ import annotations

from typing import Any

from memory_plugin._version import __version__
from memory_plugin.agentic.models import BASE as AGENTIC_BASE
from memory_plugin.agentic.models import MAX_K
from memory_plugin.console import ASSETS as CONSOLE_ASSETS
from memory_plugin.histories.service import MAX_PAGE_SIZE, MAX_RECORDS, MAX_TOP_K
from memory_plugin.opensearch_client import MAX_RESULT_WINDOW
from memory_plugin.settings import REGIONS
from memory_plugin.stores.filters import DATE_FIELDS, TOP_LEVEL_FIELDS
from memory_plugin.stores.records import RECORD_TYPES

JSON = "application/json"


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _body(schema: dict[str, Any], required: bool = True) -> dict[str, Any]:
    return {"required": required, "content": {JSON: {"schema": schema}}}


def _ok(schema: dict[str, Any], status: str = "200", description: str = "Success") -> dict[str, Any]:
    return {status: {"description": description, "content": {JSON: {"schema": schema}}}}


def _errors(style: str, *statuses: str) -> dict[str, Any]:
    schema = _ref("OpenSearchError" if style == "opensearch" else "TelnyxErrors")
    words = {
        "400": "Bad input",
        "401": "No valid credential",
        "403": "The credential does not grant this",
        "404": "Not found",
        "405": "Wrong method",
        "408": "The body did not arrive in time",
        "409": "Conflict",
        "413": "Body too large",
        "503": "Unavailable",
        "507": "Storage full",
    }
    return {s: {"description": words[s], "content": {JSON: {"schema": schema}}} for s in statuses}


def _path_param(name: str) -> dict[str, Any]:
    return {"name": name, "in": "path", "required": True, "schema": {"type": "string", "minLength": 1}}


def _query(name: str, schema: dict[str, Any], required: bool = False, description: str = "") -> dict[str, Any]:
    param = {"name": name, "in": "query", "required": required, "schema": schema}
    if description:
        param["description"] = description
    return param


PAGING = [
    _query("max_results", {"type": "integer", "minimum": 1, "maximum": MAX_RESULT_WINDOW, "default": 10}),
    _query("next_token", {"type": "integer", "minimum": 0, "default": 0}),
]
OS = ("400", "401", "404")


def _memory_operations() -> dict[str, Any]:
    conversation = "/_plugins/_ml/memory/conversation"
    memory = "/_plugins/_ml/memory"
    interaction_body = {
        "type": "object",
        "required": ["input", "response"],
        "properties": {
            name: {"type": "string"} for name in ("input", "prompt_template", "response", "origin", "additional_info")
        },
    }
    message_body = {
        "type": "object",
        "properties": {
            **{
                name: {"type": "string"}
                for name in ("input", "prompt_template", "response", "origin", "parent_message_id")
            },
            "additional_info": _ref("StringMap"),
            "trace_number": {"type": "integer", "minimum": 0},
        },
    }
    search = {
        "summary": "Search with an OpenSearch query body",
        "requestBody": _body(_ref("SearchBody"), required=False),
        "responses": {**_ok(_ref("SearchResponse")), **_errors("opensearch", *OS)},
    }
    return {
        conversation: {
            "post": {
                "tags": ["memory 2.11"],
                "summary": "Create a conversation",
                "requestBody": _body({"type": "object", "properties": {"name": {"type": "string"}}}, required=False),
                "responses": {
                    **_ok(
                        {
                            "type": "object",
                            "required": ["conversation_id"],
                            "properties": {"conversation_id": {"type": "string"}},
                        }
                    ),
                    **_errors("opensearch", "400", "401"),
                },
            },
            "get": {
                "tags": ["memory 2.11"],
                "summary": "List conversations, newest first",
                "parameters": PAGING,
                "responses": {
                    **_ok(
                        {
                            "type": "object",
                            "properties": {
                                "conversations": {"type": "array", "items": _ref("Conversation")},
                                "next_token": {"type": "integer"},
                            },
                        }
                    ),
                    **_errors("opensearch", "400", "401"),
                },
            },
        },
        conversation + "/{conversation_id}": {
            "parameters": [_path_param("conversation_id")],
            "post": {
                "tags": ["memory 2.11"],
                "summary": "Add an interaction",
                "requestBody": _body(interaction_body),
                "responses": {
                    **_ok({"type": "object", "properties": {"interaction_id": {"type": "string"}}}),
                    **_errors("opensearch", *OS),
                },
            },
            "get": {
                "tags": ["memory 2.11"],
                "summary": "List interactions, newest first",
                "parameters": PAGING,
                "responses": {
                    **_ok(
                        {
                            "type": "object",
                            "properties": {
                                "interactions": {"type": "array", "items": _ref("Interaction")},
                                "next_token": {"type": "integer"},
                            },
                        }
                    ),
                    **_errors("opensearch", *OS),
                },
            },
            "delete": {
                "tags": ["memory 2.11"],
                "summary": "Delete a conversation and its interactions",
                "responses": {**_ok(_ref("Success")), **_errors("opensearch", *OS)},
            },
        },
        memory: {
            "post": {
                "tags": ["memory 2.12+"],
                "summary": "Create a memory",
                "requestBody": _body(
                    {
                        "type": "object",
                        "properties": {"name": {"type": "string"}, "additional_info": _ref("StringMap")},
                    },
                    required=False,
                ),
                "responses": {
                    **_ok({"type": "object", "properties": {"memory_id": {"type": "string"}}}),
                    **_errors("opensearch", "400", "401"),
                },
            },
            "get": {
                "tags": ["memory 2.12+"],
                "summary": "List memories, last updated first",
                "parameters": PAGING,
                "responses": {
                    **_ok(
                        {
                            "type": "object",
                            "properties": {
                                "memories": {"type": "array", "items": _ref("Memory")},
                                "next_token": {"type": "integer"},
                            },
                        }
                    ),
                    **_errors("opensearch", "400", "401"),
                },
            },
        },
        memory + "/_search": {
            "get": {"tags": ["memory 2.12+"], **search},
            "post": {"tags": ["memory 2.12+"], **search},
        },
        memory + "/message/{message_id}": {
            "parameters": [_path_param("message_id")],
            "get": {
                "tags": ["memory 2.12+"],
                "summary": "Get a message",
                "responses": {**_ok(_ref("Message")), **_errors("opensearch", *OS)},
            },
            "put": {
                "tags": ["memory 2.12+"],
                "summary": "Update a message's response or additional_info",
                "requestBody": _body(
                    {
                        "type": "object",
                        "properties": {"response": {"type": "string"}, "additional_info": _ref("StringMap")},
                        "additionalProperties": False,
                    }
                ),
                "responses": {**_ok(_ref("UpdateResponse")), **_errors("opensearch", *OS)},
            },
        },
        memory + "/message/{message_id}/traces": {
            "parameters": [_path_param("message_id")],
            "get": {
                "tags": ["memory 2.12+"],
                "summary": "List a message's traces",
                "parameters": PAGING,
                "responses": {
                    **_ok(
                        {
                            "type": "object",
                            "properties": {
                                "traces": {"type": "array", "items": _ref("Message")},
                                "next_token": {"type": "integer"},
                            },
                        }
                    ),
                    **_errors("opensearch", *OS),
                },
            },
        },
        memory + "/{memory_id}": {
            "parameters": [_path_param("memory_id")],
            "get": {
                "tags": ["memory 2.12+"],
                "summary": "Get a memory",
                "responses": {**_ok(_ref("Memory")), **_errors("opensearch", *OS)},
            },
            "put": {
                "tags": ["memory 2.12+"],
                "summary": "Update a memory's name or additional_info",
                "requestBody": _body(
                    {
                        "type": "object",
                        "properties": {"name": {"type": "string"}, "additional_info": _ref("StringMap")},
                        "additionalProperties": False,
                    }
                ),
                "responses": {**_ok(_ref("UpdateResponse")), **_errors("opensearch", *OS)},
            },
            "delete": {
                "tags": ["memory 2.12+"],
                "summary": "Delete a memory and its messages",
                "responses": {**_ok(_ref("Success")), **_errors("opensearch", *OS)},
            },
        },
        memory + "/{memory_id}/messages": {
            "parameters": [_path_param("memory_id")],
            "post": {
                "tags": ["memory 2.12+"],
                "summary": "Add a message",
                "requestBody": _body(message_body),
                "responses": {
                    **_ok({"type": "object", "properties": {"message_id": {"type": "string"}}}),
                    **_errors("opensearch", *OS),
                },
            },
            "get": {
                "tags": ["memory 2.12+"],
                "summary": "List messages, oldest first",
                "parameters": PAGING,
                "responses": {
                    **_ok(
                        {
                            "type": "object",
                            "properties": {
                                "messages": {"type": "array", "items": _ref("Message")},
                                "next_token": {"type": "integer"},
                            },
                        }
                    ),
                    **_errors("opensearch", *OS),
                },
            },
        },
        memory + "/{memory_id}/_search": {
            "parameters": [_path_param("memory_id")],
            "get": {"tags": ["memory 2.12+"], **search},
            "post": {"tags": ["memory 2.12+"], **search},
        },
    }


def _filter_parameters() -> list[dict[str, Any]]:
    params = []
    for field in TOP_LEVEL_FIELDS:
        if field in DATE_FIELDS:
            for op in ("gte", "gt", "lte", "lt"):
                params.append(_query(f"filter[{field}][{op}]", {"type": "string", "format": "date-time"}))
        else:
            params.append(_query(f"filter[{field}]", {"type": "string"}, description="exact match"))
            params.append(_query(f"filter[{field}][in]", {"type": "string"}, description="comma-separated values"))
            params.append(
                _query(f"filter[{field}][contains]", {"type": "string"}, description="case-insensitive substring")
            )
    params.append(
        _query("filter[language]", {"type": "string"}, description="any other field filters metadata.<field>")
    )
    return params


def _history_operations() -> dict[str, Any]:
    base = "/v2/ai/conversation_histories"
    record = {
        "type": "object",
        "required": ["record_type", "text"],
        "additionalProperties": False,
        "properties": {
            "record_id": {"type": "string", "pattern": "^[A-Za-z0-9._:-]{1,128}$"},
            "record_type": {"enum": list(RECORD_TYPES)},
            "region": {"enum": list(REGIONS)},
            "text": {"type": "string", "minLength": 1},
            "user_id": {"type": "string"},
            "document_id": {"type": "string"},
            "record_created_at": {"type": "string", "format": "date-time"},
            "retention": {"type": "string"},
            "metadata": {"type": "object", "additionalProperties": {"type": ["string", "number", "boolean"]}},
        },
    }
    search_params = [
        _query("q", {"type": "string", "minLength": 1}, required=True),
        _query("record_type", {"enum": list(RECORD_TYPES)}, required=True),
        _query("region", {"enum": list(REGIONS)}),
        _query("top_k", {"type": "integer", "minimum": 1, "maximum": MAX_TOP_K, "default": 20}),
        _query("min_score", {"type": "number", "minimum": 0, "maximum": 1}),
        _query("page[number]", {"type": "integer", "minimum": 1, "default": 1}),
        _query("page[size]", {"type": "integer", "minimum": 1, "maximum": MAX_PAGE_SIZE, "default": 20}),
        *_filter_parameters(),
    ]
    ingested = {
        "type": "object",
        "properties": {
            "record_id": {"type": "string"},
            "region": {"type": "string"},
            "record_type": {"type": "string"},
            "chunk_total": {"type": "integer"},
            "ingested_at": {"type": "string", "format": "date-time"},
        },
    }
    return {
        base: {
            "get": {
                "tags": ["conversation histories"],
                "summary": "Search conversation histories",
                "parameters": search_params,
                "responses": {**_ok(_ref("SearchResults")), **_errors("telnyx", "400", "401", "503")},
            },
            "post": {
                "tags": ["conversation histories"],
                "summary": "Ingest records (chunked, embedded, indexed)",
                "requestBody": _body(
                    {
                        "type": "object",
                        "required": ["records"],
                        "additionalProperties": False,
                        "properties": {
                            "records": {"type": "array", "minItems": 1, "maxItems": MAX_RECORDS, "items": record}
                        },
                    }
                ),
                "responses": {
                    **_ok(
                        {"type": "object", "properties": {"data": {"type": "array", "items": ingested}}},
                        "201",
                        "Ingested",
                    ),
                    **_errors("telnyx", "400", "401", "408", "413", "503"),
                },
            },
            "delete": {
                "tags": ["conversation histories"],
                "summary": "Delete every matching record; filter[user_id] alone erases those users, memory included",
                "parameters": _filter_parameters(),
                "responses": {
                    **_ok(
                        {
                            "type": "object",
                            "properties": {
                                "data": {
                                    "type": "object",
                                    "properties": {
                                        "deleted_records": {"type": "integer"},
                                        "deleted_chunks": {"type": "integer"},
                                        "deleted_memories": {
                                            "type": "integer",
                                            "description": "For a filter on user_id alone: those users' memories erased",
                                        },
                                        "deleted_messages": {
                                            "type": "integer",
                                            "description": "... and their messages, traces included",
                                        },
                                        "deleted_memory_containers": {
                                            "type": "integer",
                                            "description": "... and their agentic memory containers, every memory in them included",
                                        },
                                    },
                                }
                            },
                        }
                    ),
                    **_errors("telnyx", "400", "401", "503"),
                },
            },
        },
        base + "/{record_id}": {
            "parameters": [_path_param("record_id")],
            "delete": {
                "tags": ["conversation histories"],
                "summary": "Delete one record",
                "responses": {
                    **_ok(
                        {
                            "type": "object",
                            "properties": {
                                "data": {
                                    "type": "object",
                                    "properties": {
                                        "record_id": {"type": "string"},
                                        "deleted_chunks": {"type": "integer"},
                                    },
                                }
                            },
                        }
                    ),
                    **_errors("telnyx", "400", "401", "404", "503"),
                },
            },
        },
    }


def _schemas() -> dict[str, Any]:
    string_or_null = {"type": ["string", "null"]}
    return {
        "StringMap": {"type": "object", "additionalProperties": {"type": "string"}},
        "Success": {"type": "object", "properties": {"success": {"type": "boolean"}}},
        "Conversation": {
            "type": "object",
            "properties": {
                "conversation_id": {"type": "string"},
                "create_time": {"type": "string"},
                "name": {"type": "string"},
            },
        },
        "Interaction": {
            "type": "object",
            "properties": {
                "conversation_id": {"type": "string"},
                "interaction_id": {"type": "string"},
                "create_time": {"type": "string"},
                **{
                    name: string_or_null
                    for name in ("input", "prompt_template", "response", "origin", "additional_info")
                },
            },
        },
        "Memory": {
            "type": "object",
            "properties": {
                "memory_id": {"type": "string"},
                "create_time": {"type": "string"},
                "updated_time": {"type": "string"},
                "name": {"type": "string"},
                "user": {"type": "string"},
                "additional_info": _ref("StringMap"),
            },
        },
        "Message": {
            "type": "object",
            "properties": {
                "memory_id": {"type": "string"},
                "message_id": {"type": "string"},
                "create_time": {"type": "string"},
                **{name: string_or_null for name in ("input", "prompt_template", "response", "origin")},
                "additional_info": {"oneOf": [_ref("StringMap"), {"type": "null"}]},
                "parent_message_id": {"type": "string"},
                "trace_number": {"type": "integer"},
            },
        },
        "UpdateResponse": {
            "type": "object",
            "properties": {"_index": {"type": "string"}, "_id": {"type": "string"}, "result": {"type": "string"}},
        },
        "SearchBody": {
            "type": "object",
            "properties": {
                "query": {"type": "object"},
                "sort": {},
                "from": {"type": "integer", "minimum": 0},
                "size": {"type": "integer", "minimum": 0, "maximum": MAX_RESULT_WINDOW},
                "_source": {},
            },
        },
        "SearchResponse": {
            "type": "object",
            "properties": {
                "took": {"type": "integer"},
                "hits": {
                    "type": "object",
                    "properties": {
                        "total": {"type": "object"},
                        "hits": {
                            "type": "array",
                            "items": {
                                "type": "object",
                                "properties": {"_id": {"type": "string"}, "_source": {"type": "object"}},
                            },
                        },
                    },
                },
            },
        },
        "SearchResults": {
            "type": "object",
            "properties": {
                "data": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "id": {"type": "string"},
                            "record_id": {"type": "string"},
                            "chunk_index": {"type": "integer"},
                            "chunk_total": {"type": "integer"},
                            "text": {"type": "string"},
                            "score": {"type": "number"},
                            "record_type": {"type": "string"},
                            "region": {"type": "string"},
                            "user_id": string_or_null,
                            "organization_id": {"type": "string"},
                            "document_id": {"type": "string"},
                            "record_created_at": {"type": "string"},
                            "ingested_at": {"type": "string"},
                            "metadata": {"type": "object"},
                        },
                    },
                },
                "meta": {
                    "type": "object",
                    "properties": {
                        "total_pages": {"type": "integer"},
                        "total_results": {"type": "integer"},
                        "page_number": {"type": "integer"},
                        "page_size": {"type": "integer"},
                        "failed_regions": {"type": "array", "items": {"type": "string"}},
                    },
                },
            },
        },
        "OpenSearchError": {
            "type": "object",
            "required": ["error", "status"],
            "properties": {
                "error": {
                    "type": "object",
                    "required": ["root_cause", "type", "reason"],
                    "properties": {
                        "root_cause": {"type": "array", "items": {"type": "object", "required": ["type", "reason"]}},
                        "type": {"type": "string"},
                        "reason": {"type": "string"},
                    },
                },
                "status": {"type": "integer"},
            },
        },
        "TelnyxErrors": {
            "type": "object",
            "required": ["errors"],
            "properties": {
                "errors": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "required": ["code", "title", "detail"],
                        "properties": {
                            "code": {"type": "string"},
                            "title": {"type": "string"},
                            "detail": {"type": "string"},
                            "source": {"type": "object", "properties": {"parameter": {"type": "string"}}},
                        },
                    },
                }
            },
        },
    }


# -- agentic memory (ML Commons 3.3+) -------------------------------------------------------

AGENTIC_TAG = ["agentic memory 3.3+"]
AGENTIC_ERRORS = ("400", "401", "403", "404")
ANY_OBJECT = {"type": "object"}
STRING_MAP = {"type": "object", "additionalProperties": {"type": "string"}}
MEMORY_TYPE = {
    "name": "memory_type",
    "in": "path",
    "required": True,
    "schema": {"type": "string", "enum": ["sessions", "working", "long-term", "history"]},
}


def _agentic_op(
    summary: str,
    response: dict[str, Any],
    body: dict[str, Any] | None = None,
    required: bool = True,
    errors: tuple[str, ...] = AGENTIC_ERRORS,
    **extra: Any,
) -> dict[str, Any]:
    operation: dict[str, Any] = {"tags": AGENTIC_TAG, "summary": summary, **extra}
    if body is not None:
        operation["requestBody"] = _body(body, required=required)
    operation["responses"] = {**_ok(response), **_errors("opensearch", *errors)}
    return operation


def _agentic_operations() -> dict[str, Any]:
    strategy = {
        "type": "object",
        "required": ["type", "namespace"],
        "properties": {
            "id": {"type": "string"},
            "type": {"type": "string", "enum": ["SEMANTIC", "USER_PREFERENCE", "SUMMARY"]},
            "namespace": {"type": "array", "items": {"type": "string"}, "minItems": 1},
            "enabled": {"type": "boolean"},
            "configuration": ANY_OBJECT,
        },
    }
    configuration = {
        "type": "object",
        "properties": {
            "embedding_model_type": {"type": "string", "enum": ["TEXT_EMBEDDING"]},
            "embedding_model_id": {"type": "string"},
            "embedding_dimension": {"type": "integer"},
            "llm_id": {"type": "string"},
            "max_infer_size": {"type": "integer", "minimum": 1, "maximum": 10},
            "index_prefix": {"type": "string"},
            "use_system_index": {"type": "boolean"},
            "disable_history": {"type": "boolean"},
            "disable_session": {"type": "boolean"},
            "index_settings": ANY_OBJECT,
            "parameters": ANY_OBJECT,
            "strategies": {"type": "array", "items": strategy},
            "retention_policy": ANY_OBJECT,
        },
    }
    container = {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "description": {"type": "string"},
            "backend_roles": {"type": "array", "items": {"type": "string", "pattern": "^[A-Za-z0-9:+=,.@_/-]{1,128}$"}},
            "configuration": configuration,
        },
    }
    message = {
        "type": "object",
        "required": ["role", "content"],
        "properties": {"role": {"type": "string"}, "content": {"type": "array", "items": ANY_OBJECT}},
    }
    add = {
        "type": "object",
        "properties": {
            "payload_type": {"type": "string", "enum": ["conversational", "data"]},
            "messages": {"type": "array", "items": message},
            "structured_data": ANY_OBJECT,
            "structured_data_blob": ANY_OBJECT,
            "binary_data": {"type": "string"},
            "namespace": STRING_MAP,
            "metadata": STRING_MAP,
            "tags": STRING_MAP,
            "infer": {"type": "boolean"},
            "parameters": ANY_OBJECT,
            "message_id": {"type": "integer"},
            "checkpoint_id": {"type": "string"},
        },
    }
    session = {
        "type": "object",
        "properties": {
            "session_id": {"type": "string"},
            "summary": {"type": "string"},
            "metadata": ANY_OBJECT,
            "agents": ANY_OBJECT,
            "additional_info": ANY_OBJECT,
            "namespace": STRING_MAP,
        },
    }
    semantic: dict[str, Any] = {
        "type": "object",
        "required": ["query"],
        "properties": {
            "query": {"type": "string", "minLength": 1},
            "k": {"type": "integer", "minimum": 1, "maximum": MAX_K},
            "namespace": STRING_MAP,
            "tags": STRING_MAP,
            "min_score": {"type": "number"},
            "filter": ANY_OBJECT,
        },
    }
    hybrid = {
        **semantic,
        "properties": {
            **semantic["properties"],
            "bm25_weight": {"type": "number", "minimum": 0, "maximum": 1},
            "neural_weight": {"type": "number", "minimum": 0, "maximum": 1},
        },
    }
    write = {
        "type": "object",
        "properties": {
            "_index": {"type": "string"},
            "_id": {"type": "string"},
            "_version": {"type": "integer"},
            "result": {"type": "string"},
        },
    }
    search = _ref("SearchResponse")
    search_body = _ref("SearchBody")
    cid = _path_param("memory_container_id")
    typed = [cid, MEMORY_TYPE]
    container_search = _agentic_op("Search the caller's memory containers", search, search_body, required=False)
    memory_search = _agentic_op(
        "Search memories of a type (the container and owner filters are always added)", search, search_body
    )
    semantic_op = _agentic_op("k-NN search over long-term memory", search, semantic)
    hybrid_op = _agentic_op(
        "Hybrid search: BM25 and k-NN, min-max normalised, weighted arithmetic mean", search, hybrid
    )
    delete_params = [
        _query("delete_all_memories", {"type": "boolean"}),
        _query("delete_memories", {"type": "string"}, description="comma-separated memory types"),
    ]
    return {
        AGENTIC_BASE + "/_create": {
            "post": _agentic_op(
                "Create a memory container",
                {
                    "type": "object",
                    "properties": {"memory_container_id": {"type": "string"}, "status": {"type": "string"}},
                },
                container,
            )
        },
        AGENTIC_BASE + "/_search": {"get": container_search, "post": container_search},
        AGENTIC_BASE + "/{memory_container_id}": {
            "parameters": [cid],
            "get": _agentic_op("Get a memory container", ANY_OBJECT),
            "put": _agentic_op("Update a memory container", write, container),
            "delete": _agentic_op(
                "Delete a memory container with its memories",
                write,
                errors=(*AGENTIC_ERRORS, "409"),
                parameters=delete_params,
            ),
        },
        AGENTIC_BASE + "/{memory_container_id}/memories": {
            "parameters": [cid],
            "post": _agentic_op(
                "Add working memory (infer=true extracts long-term memory in the background)",
                {
                    "type": "object",
                    "properties": {"session_id": {"type": "string"}, "working_memory_id": {"type": "string"}},
                },
                add,
            ),
        },
        AGENTIC_BASE + "/{memory_container_id}/memories/sessions": {
            "parameters": [cid],
            "post": _agentic_op(
                "Create a session",
                {"type": "object", "properties": {"session_id": {"type": "string"}, "status": {"type": "string"}}},
                session,
            ),
        },
        AGENTIC_BASE + "/{memory_container_id}/memories/{memory_type}/_search": {
            "parameters": typed,
            "get": memory_search,
            "post": memory_search,
        },
        AGENTIC_BASE + "/{memory_container_id}/memories/{memory_type}/_delete_by_query": {
            "parameters": typed,
            "post": _agentic_op(
                "Delete memories of a type by query",
                ANY_OBJECT,
                {"type": "object", "required": ["query"], "properties": {"query": ANY_OBJECT}},
            ),
        },
        AGENTIC_BASE + "/{memory_container_id}/memories/{memory_type}/_semantic_search": {
            "parameters": typed,
            "get": semantic_op,
            "post": semantic_op,
        },
        AGENTIC_BASE + "/{memory_container_id}/memories/{memory_type}/_hybrid_search": {
            "parameters": typed,
            "get": hybrid_op,
            "post": hybrid_op,
        },
        AGENTIC_BASE + "/{memory_container_id}/memories/{memory_type}/{memory_id}": {
            "parameters": [*typed, _path_param("memory_id")],
            "get": _agentic_op("Get one memory", ANY_OBJECT),
            "put": _agentic_op(
                "Update one memory (allowed keys depend on the type)", write, {"type": "object", "minProperties": 1}
            ),
            "delete": _agentic_op("Delete one memory", write),
        },
    }


def openapi_document() -> dict[str, Any]:
    service = {
        "/": {
            "get": {
                "tags": ["service"],
                "summary": "Node info, as an OpenSearch node answers",
                "responses": {**_ok({"type": "object"}), **_errors("opensearch", "401")},
            }
        },
        "/_health": {
            "get": {
                "tags": ["service"],
                "summary": "Health check (no credential needed)",
                "security": [],
                "responses": _ok({"type": "object", "properties": {"status": {"type": "string"}}}),
            }
        },
        "/_metrics": {
            "get": {
                "tags": ["service"],
                "summary": "Prometheus metrics (the operator's metrics_token as a Bearer token; tenant keys get 403)",
                "responses": {
                    "200": {
                        "description": "Prometheus text format",
                        "content": {"text/plain": {"schema": {"type": "string"}}},
                    },
                    **_errors("opensearch", "401", "403"),
                },
            }
        },
        "/_console": {
            "get": {
                "tags": ["service"],
                "summary": "The web console (a page; it calls this API with your key)",
                "security": [],
                "responses": {"200": {"description": "HTML", "content": {"text/html": {"schema": {"type": "string"}}}}},
            }
        },
        "/_console/{asset}": {
            "get": {
                "tags": ["service"],
                "summary": "The console's script and stylesheet",
                "security": [],
                "parameters": [
                    {"name": "asset", "in": "path", "required": True, "schema": {"enum": sorted(CONSOLE_ASSETS)}}
                ],
                "responses": {
                    "200": {
                        "description": "JavaScript or CSS",
                        "content": {
                            "text/javascript": {"schema": {"type": "string"}},
                            "text/css": {"schema": {"type": "string"}},
                        },
                    },
                    **_errors("opensearch", "404"),
                },
            }
        },
        "/_openapi.json": {
            "get": {
                "tags": ["service"],
                "summary": "This description",
                "responses": {**_ok({"type": "object"}), **_errors("opensearch", "401")},
            }
        },
    }
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "memory_plugin",
            "version": __version__,
            "description": "OpenSearch ML Commons conversational memory (2.11 and 2.12+), agentic memory (3.3+) "
            "and semantic search over conversation histories.",
        },
        "paths": {**service, **_memory_operations(), **_history_operations(), **_agentic_operations()},
        "components": {
            "schemas": _schemas(),
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer"},
                "basic": {"type": "http", "scheme": "basic"},
            },
        },
        "security": [{"bearer": []}, {"basic": []}],
    }
