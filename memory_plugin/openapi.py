"""The OpenAPI 3.1 description of every endpoint, served at ``GET /_openapi.json``.

A test checks it against the router both ways, and schemathesis fuzzes the
live server from it, so it cannot drift from what the server does.  Each
operation is one line of a table: the builders below spell out the shapes
(objects, lists, error answers) that the operations share.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from memory_plugin._version import __version__
from memory_plugin.agentic.models import BASE as AGENTIC_BASE
from memory_plugin.agentic.models import MAX_K
from memory_plugin.console import ASSETS as CONSOLE_ASSETS
from memory_plugin.histories.service import MAX_PAGE_SIZE, MAX_RECORDS, MAX_TOP_K
from memory_plugin.histories.stores.filters import DATE_FIELDS, TOP_LEVEL_FIELDS
from memory_plugin.histories.stores.records import RECORD_TYPES
from memory_plugin.opensearch_client import MAX_RESULT_WINDOW
from memory_plugin.settings import REGIONS

Schema = dict[str, Any]

JSON = "application/json"
STRING: Schema = {"type": "string"}
INTEGER: Schema = {"type": "integer"}
NUMBER: Schema = {"type": "number"}
BOOLEAN: Schema = {"type": "boolean"}
ANY_OBJECT: Schema = {"type": "object"}
STRING_MAP: Schema = {"type": "object", "additionalProperties": STRING}
DATE_TIME: Schema = {"type": "string", "format": "date-time"}
STRING_OR_NULL: Schema = {"type": ["string", "null"]}
WEIGHT: Schema = {"type": "number", "minimum": 0, "maximum": 1}

ERROR_WORDS = {
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


def _ref(name: str) -> Schema:
    return {"$ref": f"#/components/schemas/{name}"}


def _object(properties: Schema | None = None, *, required: tuple[str, ...] = (), **keywords: Any) -> Schema:
    """A JSON object; ``keywords`` are further JSON Schema keywords (``additionalProperties``, ...)."""
    schema: Schema = {"type": "object"}
    if required:
        schema["required"] = list(required)
    if properties is not None:
        schema["properties"] = properties
    return {**schema, **keywords}


def _array(items: Schema, **keywords: Any) -> Schema:
    return {"type": "array", "items": items, **keywords}


def _each(schema: Schema, *names: str) -> Schema:
    """The same schema for several properties."""
    return dict.fromkeys(names, schema)


def _listing(key: str, item: str) -> Schema:
    """A page of a 2.11-style list: the items under ``key``, and where the next page starts."""
    return _object({key: _array(_ref(item)), "next_token": INTEGER})


def _path_param(name: str) -> Schema:
    return {"name": name, "in": "path", "required": True, "schema": {"type": "string", "minLength": 1}}


def _query(name: str, schema: Schema, required: bool = False, description: str = "") -> Schema:
    param = {"name": name, "in": "query", "required": required, "schema": schema}
    if description:
        param["description"] = description
    return param


@dataclass(frozen=True)
class _Api:
    """One API's tag, its error format, and the errors its operations usually answer."""

    tag: str
    errors: tuple[str, ...]
    error_schema: str = "OpenSearchError"

    def op(
        self,
        summary: str,
        response: Schema,
        body: Schema | None = None,
        *,
        body_required: bool = True,
        errors: tuple[str, ...] | None = None,
        status: str = "200",
        description: str = "Success",
        media: tuple[str, ...] = (JSON,),
        **extra: Any,
    ) -> Schema:
        """An operation answering ``response`` (in each of ``media``) or one of ``errors``."""
        operation: Schema = {"tags": [self.tag], "summary": summary, **extra}
        if body is not None:
            operation["requestBody"] = {"required": body_required, "content": {JSON: {"schema": body}}}
        error = {"content": {JSON: {"schema": _ref(self.error_schema)}}}
        operation["responses"] = {
            status: {"description": description, "content": {kind: {"schema": response} for kind in media}},
            **{
                code: {"description": ERROR_WORDS[code], **error}
                for code in (self.errors if errors is None else errors)
            },
        }
        return operation


SERVICE = _Api("service", ("401",))
V211 = _Api("memory 2.11", ("400", "401", "404"))
V212 = _Api("memory 2.12+", ("400", "401", "404"))
HISTORIES = _Api("conversation histories", ("400", "401", "503"), "TelnyxErrors")
AGENTIC = _Api("agentic memory 3.3+", ("400", "401", "403", "404"))
MODELS = _Api("models and connectors", ("400", "401", "404"))

#: What answers on a collection (no id in the path: nothing to be not found).
UNSCOPED = ("400", "401")
PAGING = [
    _query("max_results", {"type": "integer", "minimum": 1, "maximum": MAX_RESULT_WINDOW, "default": 10}),
    _query("next_token", {"type": "integer", "minimum": 0, "default": 0}),
]
INTERACTION_TEXTS = ("input", "prompt_template", "response", "origin")


def _update(noun: str, field: str) -> Schema:
    """A 2.12+ update: one text field and ``additional_info``, nothing else."""
    body = _object({field: STRING, "additional_info": _ref("StringMap")}, additionalProperties=False)
    return V212.op(f"Update a {noun}'s {field} or additional_info", _ref("UpdateResponse"), body)


def _memory_operations() -> Schema:
    conversation = "/_plugins/_ml/memory/conversation"
    memory = "/_plugins/_ml/memory"
    interaction = _object(_each(STRING, *INTERACTION_TEXTS, "additional_info"), required=("input", "response"))
    message = _object(
        {
            **_each(STRING, *INTERACTION_TEXTS, "parent_message_id"),
            "additional_info": _ref("StringMap"),
            "trace_number": {"type": "integer", "minimum": 0},
        }
    )
    search = V212.op(
        "Search with an OpenSearch query body", _ref("SearchResponse"), _ref("SearchBody"), body_required=False
    )
    return {
        conversation: {
            "post": V211.op(
                "Create a conversation",
                _object({"conversation_id": STRING}, required=("conversation_id",)),
                _object({"name": STRING}),
                body_required=False,
                errors=UNSCOPED,
            ),
            "get": V211.op(
                "List conversations, newest first",
                _listing("conversations", "Conversation"),
                errors=UNSCOPED,
                parameters=PAGING,
            ),
        },
        conversation + "/{conversation_id}": {
            "parameters": [_path_param("conversation_id")],
            "post": V211.op("Add an interaction", _object({"interaction_id": STRING}), interaction),
            "get": V211.op(
                "List interactions, newest first", _listing("interactions", "Interaction"), parameters=PAGING
            ),
            "delete": V211.op("Delete a conversation and its interactions", _ref("Success")),
        },
        memory: {
            "post": V212.op(
                "Create a memory",
                _object({"memory_id": STRING}),
                _object({"name": STRING, "additional_info": _ref("StringMap")}),
                body_required=False,
                errors=UNSCOPED,
            ),
            "get": V212.op(
                "List memories, last updated first", _listing("memories", "Memory"), errors=UNSCOPED, parameters=PAGING
            ),
        },
        memory + "/_search": {"get": search, "post": search},
        memory + "/message/{message_id}": {
            "parameters": [_path_param("message_id")],
            "get": V212.op("Get a message", _ref("Message")),
            "put": _update("message", "response"),
        },
        memory + "/message/{message_id}/traces": {
            "parameters": [_path_param("message_id")],
            "get": V212.op("List a message's traces", _listing("traces", "Message"), parameters=PAGING),
        },
        memory + "/{memory_id}": {
            "parameters": [_path_param("memory_id")],
            "get": V212.op("Get a memory", _ref("Memory")),
            "put": _update("memory", "name"),
            "delete": V212.op("Delete a memory and its messages", _ref("Success")),
        },
        memory + "/{memory_id}/messages": {
            "parameters": [_path_param("memory_id")],
            "post": V212.op("Add a message", _object({"message_id": STRING}), message),
            "get": V212.op("List messages, oldest first", _listing("messages", "Message"), parameters=PAGING),
        },
        memory + "/{memory_id}/_search": {
            "parameters": [_path_param("memory_id")],
            "get": search,
            "post": search,
        },
    }


def _filter_parameters() -> list[Schema]:
    params = []
    for field in TOP_LEVEL_FIELDS:
        if field in DATE_FIELDS:
            params += [_query(f"filter[{field}][{op}]", DATE_TIME) for op in ("gte", "gt", "lte", "lt")]
        else:
            params += [
                _query(f"filter[{field}]", STRING, description="exact match"),
                _query(f"filter[{field}][in]", STRING, description="comma-separated values"),
                _query(f"filter[{field}][contains]", STRING, description="case-insensitive substring"),
            ]
    params.append(_query("filter[language]", STRING, description="any other field filters metadata.<field>"))
    return params


def _history_operations() -> Schema:
    base = "/v2/ai/conversation_histories"
    record = _object(
        {
            "record_id": {"type": "string", "pattern": "^[A-Za-z0-9._:-]{1,128}$"},
            "record_type": {"enum": list(RECORD_TYPES)},
            "region": {"enum": list(REGIONS)},
            "text": {"type": "string", "minLength": 1},
            **_each(STRING, "user_id", "document_id"),
            "record_created_at": DATE_TIME,
            "retention": STRING,
            "metadata": _object(additionalProperties={"type": ["string", "number", "boolean"]}),
        },
        required=("record_type", "text"),
        additionalProperties=False,
    )
    search_params = [
        _query("q", {"type": "string", "minLength": 1}, required=True),
        _query("record_type", {"enum": list(RECORD_TYPES)}, required=True),
        _query("region", {"enum": list(REGIONS)}),
        _query("top_k", {"type": "integer", "minimum": 1, "maximum": MAX_TOP_K, "default": 20}),
        _query("min_score", WEIGHT),
        _query("page[number]", {"type": "integer", "minimum": 1, "default": 1}),
        _query("page[size]", {"type": "integer", "minimum": 1, "maximum": MAX_PAGE_SIZE, "default": 20}),
        *_filter_parameters(),
    ]
    ingested = _object(
        {**_each(STRING, "record_id", "region", "record_type"), "chunk_total": INTEGER, "ingested_at": DATE_TIME}
    )
    erased = {
        "deleted_memories": {
            "type": "integer",
            "description": "For a filter on user_id alone: those users' memories erased",
        },
        "deleted_messages": {"type": "integer", "description": "... and their messages, traces included"},
        "deleted_memory_containers": {
            "type": "integer",
            "description": "... and the agentic memory containers they own, every memory in them included",
        },
        "deleted_ml_documents": {
            "type": "integer",
            "description": "... and the connectors, models, model groups and tasks they registered",
        },
    }
    return {
        base: {
            "get": HISTORIES.op("Search conversation histories", _ref("SearchResults"), parameters=search_params),
            "post": HISTORIES.op(
                "Ingest records (chunked, embedded, indexed)",
                _object({"data": _array(ingested)}),
                _object(
                    {"records": _array(record, minItems=1, maxItems=MAX_RECORDS)},
                    required=("records",),
                    additionalProperties=False,
                ),
                errors=("400", "401", "408", "413", "503"),
                status="201",
                description="Ingested",
            ),
            "delete": HISTORIES.op(
                "Delete every matching record; filter[user_id] alone erases those users, memory included",
                _object({"data": _object({**_each(INTEGER, "deleted_records", "deleted_chunks"), **erased})}),
                parameters=_filter_parameters(),
            ),
        },
        base + "/{record_id}": {
            "parameters": [_path_param("record_id")],
            "delete": HISTORIES.op(
                "Delete one record",
                _object({"data": _object({"record_id": STRING, "deleted_chunks": INTEGER})}),
                errors=("400", "401", "404", "503"),
            ),
        },
    }


def _schemas() -> Schema:
    return {
        "StringMap": STRING_MAP,
        "Success": _object({"success": BOOLEAN}),
        "Conversation": _object(_each(STRING, "conversation_id", "create_time", "name")),
        "Interaction": _object(
            {
                **_each(STRING, "conversation_id", "interaction_id", "create_time"),
                **_each(STRING_OR_NULL, *INTERACTION_TEXTS, "additional_info"),
            }
        ),
        "Memory": _object(
            {
                **_each(STRING, "memory_id", "create_time", "updated_time", "name", "user"),
                "additional_info": _ref("StringMap"),
            }
        ),
        "Message": _object(
            {
                **_each(STRING, "memory_id", "message_id", "create_time"),
                **_each(STRING_OR_NULL, *INTERACTION_TEXTS),
                "additional_info": {"oneOf": [_ref("StringMap"), {"type": "null"}]},
                "parent_message_id": STRING,
                "trace_number": INTEGER,
            }
        ),
        "UpdateResponse": _object(_each(STRING, "_index", "_id", "result")),
        "SearchBody": _object(
            {
                "query": ANY_OBJECT,
                "sort": {},
                "from": {"type": "integer", "minimum": 0},
                "size": {"type": "integer", "minimum": 0, "maximum": MAX_RESULT_WINDOW},
                "_source": {},
            }
        ),
        "SearchResponse": _object(
            {
                "took": INTEGER,
                "hits": _object({"total": ANY_OBJECT, "hits": _array(_object({"_id": STRING, "_source": ANY_OBJECT}))}),
            }
        ),
        "SearchResults": _object(
            {
                "data": _array(
                    _object(
                        {
                            **_each(STRING, "id", "record_id"),
                            **_each(INTEGER, "chunk_index", "chunk_total"),
                            "text": STRING,
                            "score": NUMBER,
                            **_each(STRING, "record_type", "region"),
                            "user_id": STRING_OR_NULL,
                            **_each(STRING, "organization_id", "document_id", "record_created_at", "ingested_at"),
                            "metadata": ANY_OBJECT,
                        }
                    )
                ),
                "meta": _object(
                    {
                        **_each(INTEGER, "total_pages", "total_results", "page_number", "page_size"),
                        "failed_regions": _array(STRING),
                    }
                ),
            }
        ),
        "OpenSearchError": _object(
            {
                "error": _object(
                    {
                        "root_cause": _array(_object(required=("type", "reason"))),
                        **_each(STRING, "type", "reason"),
                    },
                    required=("root_cause", "type", "reason"),
                ),
                "status": INTEGER,
            },
            required=("error", "status"),
        ),
        "TelnyxErrors": _object(
            {
                "errors": _array(
                    _object(
                        {
                            **_each(STRING, "code", "title", "detail"),
                            "source": _object({"parameter": STRING}),
                        },
                        required=("code", "title", "detail"),
                    ),
                    minItems=1,
                )
            },
            required=("errors",),
        ),
    }


# -- agentic memory (ML Commons 3.3+) -------------------------------------------------------

MEMORY_TYPE = {
    "name": "memory_type",
    "in": "path",
    "required": True,
    "schema": {"type": "string", "enum": ["sessions", "working", "long-term", "history"]},
}


def _agentic_operations() -> Schema:
    strategy = _object(
        {
            "id": STRING,
            "type": {"type": "string", "enum": ["SEMANTIC", "USER_PREFERENCE", "SUMMARY"]},
            "namespace": _array(STRING, minItems=1),
            "enabled": BOOLEAN,
            "configuration": ANY_OBJECT,
        },
        required=("type", "namespace"),
    )
    configuration = _object(
        {
            "embedding_model_type": {"type": "string", "enum": ["TEXT_EMBEDDING"]},
            "embedding_model_id": STRING,
            "embedding_dimension": INTEGER,
            "llm_id": STRING,
            "max_infer_size": {"type": "integer", "minimum": 1, "maximum": 10},
            "index_prefix": STRING,
            **_each(BOOLEAN, "use_system_index", "disable_history", "disable_session"),
            **_each(ANY_OBJECT, "index_settings", "parameters"),
            "strategies": _array(strategy),
            "retention_policy": ANY_OBJECT,
        }
    )
    container = _object(
        {
            **_each(STRING, "name", "description"),
            "backend_roles": _array({"type": "string", "pattern": "^[A-Za-z0-9:+=,.@_/-]{1,128}$"}),
            "configuration": configuration,
        }
    )
    message = _object({"role": STRING, "content": _array(ANY_OBJECT)}, required=("role", "content"))
    add = _object(
        {
            "payload_type": {"type": "string", "enum": ["conversational", "data"]},
            "messages": _array(message),
            **_each(ANY_OBJECT, "structured_data", "structured_data_blob"),
            "binary_data": STRING,
            **_each(STRING_MAP, "namespace", "metadata", "tags"),
            "infer": BOOLEAN,
            "parameters": ANY_OBJECT,
            "message_id": INTEGER,
            "checkpoint_id": STRING,
        }
    )
    session = _object(
        {
            **_each(STRING, "session_id", "summary"),
            **_each(ANY_OBJECT, "metadata", "agents", "additional_info"),
            "namespace": STRING_MAP,
        }
    )
    semantic = {
        "query": {"type": "string", "minLength": 1},
        "k": {"type": "integer", "minimum": 1, "maximum": MAX_K},
        **_each(STRING_MAP, "namespace", "tags"),
        "min_score": NUMBER,
        "filter": ANY_OBJECT,
    }
    hybrid = {**semantic, **_each(WEIGHT, "bm25_weight", "neural_weight")}
    write = _object({**_each(STRING, "_index", "_id"), "_version": INTEGER, "result": STRING})
    search = _ref("SearchResponse")
    container_search = AGENTIC.op(
        "Search the caller's memory containers", search, _ref("SearchBody"), body_required=False
    )
    memory_search = AGENTIC.op(
        "Search memories of a type (the container and owner filters are always added)", search, _ref("SearchBody")
    )
    semantic_search = AGENTIC.op("k-NN search over long-term memory", search, _object(semantic, required=("query",)))
    hybrid_search = AGENTIC.op(
        "Hybrid search: BM25 and k-NN, min-max normalised, weighted arithmetic mean",
        search,
        _object(hybrid, required=("query",)),
    )
    delete_params = [
        _query("delete_all_memories", BOOLEAN),
        _query("delete_memories", STRING, description="comma-separated memory types"),
    ]
    container_path = [_path_param("memory_container_id")]
    typed_path = [*container_path, MEMORY_TYPE]
    typed = AGENTIC_BASE + "/{memory_container_id}/memories/{memory_type}"
    return {
        AGENTIC_BASE + "/_create": {
            "post": AGENTIC.op(
                "Create a memory container", _object(_each(STRING, "memory_container_id", "status")), container
            )
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
                _object(_each(STRING, "session_id", "working_memory_id")),
                add,
            ),
        },
        AGENTIC_BASE + "/{memory_container_id}/memories/sessions": {
            "parameters": container_path,
            "post": AGENTIC.op("Create a session", _object(_each(STRING, "session_id", "status")), session),
        },
        typed + "/_search": {"parameters": typed_path, "get": memory_search, "post": memory_search},
        typed + "/_delete_by_query": {
            "parameters": typed_path,
            "post": AGENTIC.op(
                "Delete memories of a type by query", ANY_OBJECT, _object({"query": ANY_OBJECT}, required=("query",))
            ),
        },
        typed + "/_semantic_search": {"parameters": typed_path, "get": semantic_search, "post": semantic_search},
        typed + "/_hybrid_search": {"parameters": typed_path, "get": hybrid_search, "post": hybrid_search},
        typed + "/{memory_id}": {
            "parameters": [*typed_path, _path_param("memory_id")],
            "get": AGENTIC.op("Get one memory", ANY_OBJECT),
            "put": AGENTIC.op("Update one memory (allowed keys depend on the type)", write, _object(minProperties=1)),
            "delete": AGENTIC.op("Delete one memory", write),
        },
    }


def _service_operations() -> Schema:
    return {
        "/": {"get": SERVICE.op("Node info, as an OpenSearch node answers", ANY_OBJECT)},
        "/_health": {
            "get": SERVICE.op(
                "Health check (no credential needed)", _object({"status": STRING}), errors=(), security=[]
            )
        },
        "/_metrics": {
            "get": SERVICE.op(
                "Prometheus metrics (the operator's metrics_token as a Bearer token; tenant keys get 403)",
                STRING,
                errors=("401", "403"),
                description="Prometheus text format",
                media=("text/plain",),
            )
        },
        "/_console": {
            "get": SERVICE.op(
                "The web console (a page; it calls this API with your key)",
                STRING,
                errors=(),
                description="HTML",
                media=("text/html",),
                security=[],
            )
        },
        "/_console/{asset}": {
            "get": SERVICE.op(
                "The console's script and stylesheet",
                STRING,
                errors=("404",),
                description="JavaScript or CSS",
                media=("text/javascript", "text/css"),
                security=[],
                parameters=[
                    {"name": "asset", "in": "path", "required": True, "schema": {"enum": sorted(CONSOLE_ASSETS)}}
                ],
            )
        },
        "/_openapi.json": {"get": SERVICE.op("This description", ANY_OBJECT)},
    }


def _ml_operations() -> Schema:
    action = _object(
        {
            "action_type": {"enum": ["predict", "execute", "PREDICT", "EXECUTE"]},
            **_each(STRING, "method", "url", "request_body", "pre_process_function", "post_process_function"),
            "headers": _ref("StringMap"),
        },
        required=("action_type", "method", "url"),
    )
    connector = _object(
        {
            **_each(STRING, "name", "description", "version"),
            "protocol": {"enum": ["http", "aws_sigv4"]},
            "parameters": ANY_OBJECT,
            "credential": _ref("StringMap"),
            "actions": _array(action),
        }
    )
    register = _object(
        {
            **_each(STRING, "name", "description", "version", "model_group_id", "connector_id", "model_format"),
            "function_name": STRING,
            "connector": connector,
        },
        required=("name",),
    )
    predict = _object(
        {
            "parameters": ANY_OBJECT,
            "text_docs": _array(STRING),
            "return_number": {"type": "boolean"},
            "target_response": _array(STRING),
        }
    )
    results = _object({"inference_results": _array(ANY_OBJECT)})
    search = MODELS.op(
        "Search with an OpenSearch query body", _ref("SearchResponse"), _ref("SearchBody"), body_required=False
    )
    write = _object({**_each(STRING, "_index", "_id"), "_version": INTEGER, "result": STRING})
    connectors, models = "/_plugins/_ml/connectors", "/_plugins/_ml/models"
    return {
        connectors + "/_create": {
            "post": MODELS.op(
                "Create a connector (credentials are encrypted and never shown)",
                _object({"connector_id": STRING}),
                connector,
                errors=UNSCOPED,
            )
        },
        connectors + "/_search": {"get": search, "post": search},
        connectors + "/{connector_id}": {
            "get": MODELS.op("Get a connector", ANY_OBJECT),
            "put": MODELS.op("Update a connector", write, connector),
            "delete": MODELS.op("Delete a connector", write, errors=(*MODELS.errors, "409")),
        },
        models + "/_register": {
            "post": MODELS.op(
                "Register a remote model, or the built-in text embedding model",
                _object(_each(STRING, "task_id", "status", "model_id")),
                register,
                errors=UNSCOPED,
                parameters=[_query("deploy", {"type": "boolean"})],
            )
        },
        models + "/_search": {"get": search, "post": search},
        models + "/{model_id}": {
            "get": MODELS.op("Get a model", ANY_OBJECT),
            "delete": MODELS.op("Delete an undeployed model", write),
        },
        models + "/{model_id}/_deploy": {
            "post": MODELS.op("Deploy a model", _object(_each(STRING, "task_id", "task_type", "status")))
        },
        models + "/{model_id}/_undeploy": {"post": MODELS.op("Undeploy a model", ANY_OBJECT)},
        models + "/_undeploy": {
            "post": MODELS.op(
                "Undeploy models (model_ids; without it, every deployed one)",
                ANY_OBJECT,
                _object({"model_ids": _array(STRING)}),
                body_required=False,
                errors=UNSCOPED,
            )
        },
        models + "/{model_id}/_predict": {
            "post": MODELS.op("Call a model: parameters for a remote one, text_docs to embed", results, predict)
        },
        "/_plugins/_ml/_predict/{algorithm}/{model_id}": {
            "post": MODELS.op("Embed text_docs (algorithm text_embedding)", results, predict)
        },
        "/_plugins/_ml/tasks/{task_id}": {
            "get": MODELS.op("Get a register or deploy task", ANY_OBJECT),
            "delete": MODELS.op("Delete a task", write),
        },
        "/_plugins/_ml/tasks/_search": {"get": search, "post": search},
    }


def openapi_document() -> Schema:
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "memory_plugin",
            "version": __version__,
            "description": "OpenSearch ML Commons conversational memory (2.11 and 2.12+), agentic memory (3.3+) "
            "and semantic search over conversation histories.",
        },
        "paths": {
            **_service_operations(),
            **_memory_operations(),
            **_history_operations(),
            **_agentic_operations(),
            **_ml_operations(),
        },
        "components": {
            "schemas": _schemas(),
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer"},
                "basic": {"type": "http", "scheme": "basic"},
            },
        },
        "security": [{"bearer": []}, {"basic": []}],
    }
