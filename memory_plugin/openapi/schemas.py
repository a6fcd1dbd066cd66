"""The components operations refer to (``#/components/schemas/...``): records, search bodies, error formats."""

from __future__ import annotations

from memory_plugin.openapi.shapes import (
    ANY_OBJECT,
    BOOLEAN,
    INTEGER,
    NUMBER,
    STRING,
    STRING_MAP,
    STRING_OR_NULL,
    Schema,
    array,
    each,
    json_object,
    ref,
)
from memory_plugin.opensearch_client import MAX_RESULT_WINDOW

INTERACTION_TEXTS = ("input", "prompt_template", "response", "origin")


def component_schemas() -> Schema:
    return {
        "StringMap": STRING_MAP,
        "Success": json_object({"success": BOOLEAN}),
        "Conversation": json_object(each(STRING, "conversation_id", "create_time", "name")),
        "Interaction": json_object(
            {
                **each(STRING, "conversation_id", "interaction_id", "create_time"),
                **each(STRING_OR_NULL, *INTERACTION_TEXTS, "additional_info"),
            }
        ),
        "Memory": json_object(
            {
                **each(STRING, "memory_id", "create_time", "updated_time", "name", "user"),
                "additional_info": ref("StringMap"),
            }
        ),
        "Message": json_object(
            {
                **each(STRING, "memory_id", "message_id", "create_time"),
                **each(STRING_OR_NULL, *INTERACTION_TEXTS),
                "additional_info": {"oneOf": [ref("StringMap"), {"type": "null"}]},
                "parent_message_id": STRING,
                "trace_number": INTEGER,
            }
        ),
        "UpdateResponse": json_object(each(STRING, "_index", "_id", "result")),
        "SearchBody": json_object(
            {
                "query": ANY_OBJECT,
                "sort": {},
                "from": {"type": "integer", "minimum": 0},
                "size": {"type": "integer", "minimum": 0, "maximum": MAX_RESULT_WINDOW},
                "_source": {},
            }
        ),
        "SearchResponse": json_object(
            {
                "took": INTEGER,
                "hits": json_object(
                    {"total": ANY_OBJECT, "hits": array(json_object({"_id": STRING, "_source": ANY_OBJECT}))}
                ),
            }
        ),
        "SearchResults": json_object(
            {
                "data": array(
                    json_object(
                        {
                            **each(STRING, "id", "record_id"),
                            **each(INTEGER, "chunk_index", "chunk_total"),
                            "text": STRING,
                            "score": NUMBER,
                            **each(STRING, "record_type", "region"),
                            "user_id": STRING_OR_NULL,
                            **each(STRING, "organization_id", "document_id", "record_created_at", "ingested_at"),
                            "metadata": ANY_OBJECT,
                        }
                    )
                ),
                "meta": json_object(
                    {
                        **each(INTEGER, "total_pages", "total_results", "page_number", "page_size"),
                        "failed_regions": array(STRING),
                    }
                ),
            }
        ),
        "OpenSearchError": json_object(
            {
                "error": json_object(
                    {
                        "root_cause": array(json_object(required=("type", "reason"))),
                        **each(STRING, "type", "reason"),
                    },
                    required=("root_cause", "type", "reason"),
                ),
                "status": INTEGER,
            },
            required=("error", "status"),
        ),
        "TelnyxErrors": json_object(
            {
                "errors": array(
                    json_object(
                        {
                            **each(STRING, "code", "title", "detail"),
                            "source": json_object({"parameter": STRING}),
                        },
                        required=("code", "title", "detail"),
                    ),
                    minItems=1,
                )
            },
            required=("errors",),
        ),
    }
