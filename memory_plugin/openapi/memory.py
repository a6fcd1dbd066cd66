"""Conversational memory: the 2.11 conversations and the 2.12+ memories and messages."""

from __future__ import annotations

from memory_plugin.openapi.schemas import INTERACTION_TEXTS
from memory_plugin.openapi.shapes import (
    PAGING,
    STRING,
    UNSCOPED,
    Api,
    Schema,
    each,
    json_object,
    listing,
    path_param,
    ref,
)

V211 = Api("memory 2.11", ("400", "401", "404"))
V212 = Api("memory 2.12+", ("400", "401", "404"))


def _update(noun: str, field: str) -> Schema:
    """A 2.12+ update: one text field and ``additional_info``, nothing else."""
    body = json_object({field: STRING, "additional_info": ref("StringMap")}, additionalProperties=False)
    return V212.op(f"Update a {noun}'s {field} or additional_info", ref("UpdateResponse"), body)


def memory_operations() -> Schema:
    conversation = "/_plugins/_ml/memory/conversation"
    memory = "/_plugins/_ml/memory"
    interaction = json_object(each(STRING, *INTERACTION_TEXTS, "additional_info"), required=("input", "response"))
    message = json_object(
        {
            **each(STRING, *INTERACTION_TEXTS, "parent_message_id"),
            "additional_info": ref("StringMap"),
            "trace_number": {"type": "integer", "minimum": 0},
        }
    )
    search = V212.op(
        "Search with an OpenSearch query body", ref("SearchResponse"), ref("SearchBody"), body_required=False
    )
    return {
        conversation: {
            "post": V211.op(
                "Create a conversation",
                json_object({"conversation_id": STRING}, required=("conversation_id",)),
                json_object({"name": STRING}),
                body_required=False,
                errors=UNSCOPED,
            ),
            "get": V211.op(
                "List conversations, newest first",
                listing("conversations", "Conversation"),
                errors=UNSCOPED,
                parameters=PAGING,
            ),
        },
        conversation + "/{conversation_id}": {
            "parameters": [path_param("conversation_id")],
            "post": V211.op("Add an interaction", json_object({"interaction_id": STRING}), interaction),
            "get": V211.op(
                "List interactions, newest first", listing("interactions", "Interaction"), parameters=PAGING
            ),
            "delete": V211.op("Delete a conversation and its interactions", ref("Success")),
        },
        memory: {
            "post": V212.op(
                "Create a memory",
                json_object({"memory_id": STRING}),
                json_object({"name": STRING, "additional_info": ref("StringMap")}),
                body_required=False,
                errors=UNSCOPED,
            ),
            "get": V212.op(
                "List memories, last updated first", listing("memories", "Memory"), errors=UNSCOPED, parameters=PAGING
            ),
        },
        memory + "/_search": {"get": search, "post": search},
        memory + "/message/{message_id}": {
            "parameters": [path_param("message_id")],
            "get": V212.op("Get a message", ref("Message")),
            "put": _update("message", "response"),
        },
        memory + "/message/{message_id}/traces": {
            "parameters": [path_param("message_id")],
            "get": V212.op("List a message's traces", listing("traces", "Message"), parameters=PAGING),
        },
        memory + "/{memory_id}": {
            "parameters": [path_param("memory_id")],
            "get": V212.op("Get a memory", ref("Memory")),
            "put": _update("memory", "name"),
            "delete": V212.op("Delete a memory and its messages", ref("Success")),
        },
        memory + "/{memory_id}/messages": {
            "parameters": [path_param("memory_id")],
            "post": V212.op("Add a message", json_object({"message_id": STRING}), message),
            "get": V212.op("List messages, oldest first", listing("messages", "Message"), parameters=PAGING),
        },
        memory + "/{memory_id}/_search": {
            "parameters": [path_param("memory_id")],
            "get": search,
            "post": search,
        },
    }
