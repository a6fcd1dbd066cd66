"""Conversation histories: ingesting, searching and erasing records."""

from __future__ import annotations

from memory_plugin.histories.service import MAX_PAGE_SIZE, MAX_RECORDS, MAX_TOP_K, SEARCH_MODES
from memory_plugin.histories.stores.filters import DATE_FIELDS, TOP_LEVEL_FIELDS
from memory_plugin.histories.stores.records import RECORD_TYPES
from memory_plugin.openapi.shapes import (
    DATE_TIME,
    INTEGER,
    STRING,
    Api,
    Schema,
    array,
    each,
    json_object,
    path_param,
    query_param,
    ref,
)
from memory_plugin.settings import REGIONS

HISTORIES = Api("conversation histories", ("400", "401", "503"), "TelnyxErrors")


def _filter_parameters() -> list[Schema]:
    params = []
    for field in TOP_LEVEL_FIELDS:
        if field in DATE_FIELDS:
            params += [query_param(f"filter[{field}][{op}]", DATE_TIME) for op in ("gte", "gt", "lte", "lt")]
        else:
            params += [
                query_param(f"filter[{field}]", STRING, description="exact match"),
                query_param(f"filter[{field}][in]", STRING, description="comma-separated values"),
                query_param(f"filter[{field}][contains]", STRING, description="case-insensitive substring"),
            ]
    params.append(query_param("filter[language]", STRING, description="any other field filters metadata.<field>"))
    return params


def history_operations() -> Schema:
    base = "/v2/ai/conversation_histories"
    record = json_object(
        {
            "record_id": {"type": "string", "pattern": "^[A-Za-z0-9._:-]{1,128}$"},
            "record_type": {"enum": list(RECORD_TYPES)},
            "region": {"enum": list(REGIONS)},
            "text": {"type": "string", "minLength": 1},
            **each(STRING, "user_id", "document_id"),
            "record_created_at": DATE_TIME,
            "retention": STRING,
            "metadata": json_object(additionalProperties={"type": ["string", "number", "boolean"]}),
        },
        required=("record_type", "text"),
        additionalProperties=False,
    )
    search_params = [
        query_param("q", {"type": "string", "minLength": 1}, required=True),
        query_param("record_type", {"enum": list(RECORD_TYPES)}, required=True),
        query_param("region", {"enum": list(REGIONS)}),
        query_param("top_k", {"type": "integer", "minimum": 1, "maximum": MAX_TOP_K, "default": 20}),
        query_param(
            "min_score",
            {"type": "number", "minimum": 0},
            description="0 to 1 in semantic mode (cosine) and hybrid mode (1: first in both lists); "
            "any BM25 score in keyword mode",
        ),
        query_param(
            "mode",
            {"enum": list(SEARCH_MODES), "default": "semantic"},
            description="semantic (dense vectors), keyword (BM25 over each chunk's words and its previous turn's), "
            "or hybrid (both, fused by reciprocal rank)",
        ),
        query_param("page[number]", {"type": "integer", "minimum": 1, "default": 1}),
        query_param("page[size]", {"type": "integer", "minimum": 1, "maximum": MAX_PAGE_SIZE, "default": 20}),
        *_filter_parameters(),
    ]
    ingested = json_object(
        {**each(STRING, "record_id", "region", "record_type"), "chunk_total": INTEGER, "ingested_at": DATE_TIME}
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
            "get": HISTORIES.op("Search conversation histories", ref("SearchResults"), parameters=search_params),
            "post": HISTORIES.op(
                "Ingest records (chunked, embedded, indexed)",
                json_object({"data": array(ingested)}),
                json_object(
                    {"records": array(record, minItems=1, maxItems=MAX_RECORDS)},
                    required=("records",),
                    additionalProperties=False,
                ),
                errors=("400", "401", "408", "409", "413", "503"),
                status="201",
                description="Ingested",
            ),
            "delete": HISTORIES.op(
                "Delete every matching record; filter[user_id] alone erases those users, memory included",
                json_object({"data": json_object({**each(INTEGER, "deleted_records", "deleted_chunks"), **erased})}),
                parameters=_filter_parameters(),
            ),
        },
        base + "/{record_id}": {
            "parameters": [path_param("record_id")],
            "delete": HISTORIES.op(
                "Delete one record",
                json_object({"data": json_object({"record_id": STRING, "deleted_chunks": INTEGER})}),
                errors=("400", "401", "404", "409", "503"),
            ),
        },
    }
