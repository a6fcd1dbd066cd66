"""The ML Commons 2.12+ memory API: memories and messages (CONTRACT section 2).

The same service and stored data as the 2.11 form, under the names that
``opensearch-py``'s ``plugins.ml`` client and dashboards-assistant use.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from memory_plugin.errors import InvalidArgument, NotFound, ParseFailure
from memory_plugin.memory.dsl import MESSAGE_INDEX, META_INDEX
from memory_plugin.memory.routes_v211 import MEMORY, PAGING, paging
from memory_plugin.memory.service import check_additional_info_map
from memory_plugin.memory.views import memory_v212, message_v212, page_v211
from memory_plugin.web import check_params, json_response, principal_of, read_json_object, search_body, string_field

BASE = "/_plugins/_ml/memory"
MESSAGE_TEXT_FIELDS = ("input", "prompt_template", "response", "origin")

routes = web.RouteTableDef()
Handler = Callable[[web.Request], Awaitable[web.Response]]


#: What 2.12+ calls the things 2.11 calls conversations and interactions.
NOUNS = {"conversation": "Memory", "interaction": "Message"}


def renamed(handler: Handler) -> Handler:
    """Speak of memories and messages, as 2.12+ does, in not-found errors."""

    async def wrapper(request: web.Request) -> web.Response:
        try:
            return await handler(request)
        except NotFound as error:
            if error.kind not in NOUNS:
                raise
            reason = f"{NOUNS[error.kind]} [{error.id}] not found"
            raise NotFound(error.kind, error.id, reason=reason, parameter=error.parameter) from None

    wrapper.__name__ = handler.__name__
    wrapper.__doc__ = handler.__doc__
    return wrapper


def _update_response(index: str, document_id: str) -> dict[str, Any]:
    return {"_index": index, "_id": document_id, "result": "updated", "forced_refresh": True}


async def _update_body(request: web.Request, noun: str) -> dict[str, Any]:
    body = await read_json_object(request, required=False)
    if not body:
        raise ParseFailure(f"Failed to update {noun}: Request body is empty")
    return body


# -- memories -------------------------------------------------------------------------


@routes.post(BASE)
@renamed
async def create_memory(request: web.Request) -> web.Response:
    check_params(request)
    body = await read_json_object(request, required=False) or {}
    conversation = await request.app[MEMORY].create_conversation(
        principal_of(request),
        name=string_field(body, "name") or "",
        additional_info=check_additional_info_map(body.get("additional_info")),
    )
    return json_response({"memory_id": conversation.conversation_id})


@routes.get(BASE)
@renamed
async def list_memories(request: web.Request) -> web.Response:
    check_params(request, PAGING)
    next_token, max_results = paging(request)
    page = await request.app[MEMORY].list_conversations(
        principal_of(request), next_token, max_results, by="updated_time"
    )
    return json_response(page_v211("memories", page, memory_v212))


@routes.route("*", BASE + "/_search")
@renamed
async def search_memories(request: web.Request) -> web.Response:
    if request.method not in ("GET", "POST"):
        raise web.HTTPMethodNotAllowed(request.method, ["GET", "POST"])
    check_params(request)
    result = await request.app[MEMORY].search_conversations(principal_of(request), await search_body(request))
    return json_response(result)


@routes.get(BASE + "/message/{message_id}")
@renamed
async def get_message(request: web.Request) -> web.Response:
    check_params(request)
    interaction = await request.app[MEMORY].get_interaction(principal_of(request), request.match_info["message_id"])
    return json_response(message_v212(interaction))


@routes.put(BASE + "/message/{message_id}")
@renamed
async def update_message(request: web.Request) -> web.Response:
    check_params(request)
    body = await _update_body(request, "interaction")
    interaction = await request.app[MEMORY].update_interaction(
        principal_of(request), request.match_info["message_id"], body
    )
    return json_response(_update_response(MESSAGE_INDEX, interaction.interaction_id))


@routes.get(BASE + "/message/{message_id}/traces")
@renamed
async def list_traces(request: web.Request) -> web.Response:
    check_params(request, PAGING)
    next_token, max_results = paging(request)
    page = await request.app[MEMORY].list_traces(
        principal_of(request), request.match_info["message_id"], next_token, max_results
    )
    return json_response(page_v211("traces", page, message_v212))


@routes.get(BASE + "/{memory_id}")
@renamed
async def get_memory(request: web.Request) -> web.Response:
    check_params(request)
    conversation = await request.app[MEMORY].get_conversation(principal_of(request), request.match_info["memory_id"])
    return json_response(memory_v212(conversation))


@routes.put(BASE + "/{memory_id}")
@renamed
async def update_memory(request: web.Request) -> web.Response:
    check_params(request)
    body = await _update_body(request, "conversation")
    conversation = await request.app[MEMORY].update_conversation(
        principal_of(request), request.match_info["memory_id"], body
    )
    return json_response(_update_response(META_INDEX, conversation.conversation_id))


@routes.delete(BASE + "/{memory_id}")
@renamed
async def delete_memory(request: web.Request) -> web.Response:
    check_params(request)
    await request.app[MEMORY].delete_conversation(principal_of(request), request.match_info["memory_id"])
    return json_response({"success": True})


# -- messages -------------------------------------------------------------------------


@routes.post(BASE + "/{memory_id}/messages")
@renamed
async def create_message(request: web.Request) -> web.Response:
    check_params(request)
    body = await read_json_object(request, required=True) or {}
    fields = {name: string_field(body, name) for name in MESSAGE_TEXT_FIELDS}
    additional_info = check_additional_info_map(body.get("additional_info"))
    if not any(value and value.strip() for value in fields.values()) and not additional_info:
        raise InvalidArgument(
            "At least one of the following parameters must be non-empty: "
            "input, prompt_template, response, origin, additional_info"
        )
    trace_number = body.get("trace_number")
    if trace_number is not None and (not isinstance(trace_number, int) or isinstance(trace_number, bool)):
        raise InvalidArgument("[trace_number] must be an integer", parameter="trace_number")
    interaction = await request.app[MEMORY].create_interaction(
        principal_of(request),
        request.match_info["memory_id"],
        **fields,
        additional_info=additional_info,
        parent_interaction_id=string_field(body, "parent_message_id"),
        trace_number=trace_number,
    )
    return json_response({"message_id": interaction.interaction_id})


@routes.get(BASE + "/{memory_id}/messages")
@renamed
async def list_messages(request: web.Request) -> web.Response:
    check_params(request, PAGING)
    next_token, max_results = paging(request)
    page = await request.app[MEMORY].list_interactions(
        principal_of(request), request.match_info["memory_id"], next_token, max_results, newest_first=False
    )
    return json_response(page_v211("messages", page, message_v212))


@routes.route("*", BASE + "/{memory_id}/_search")
@renamed
async def search_messages(request: web.Request) -> web.Response:
    if request.method not in ("GET", "POST"):
        raise web.HTTPMethodNotAllowed(request.method, ["GET", "POST"])
    check_params(request)
    result = await request.app[MEMORY].search_interactions(
        principal_of(request), request.match_info["memory_id"], await search_body(request)
    )
    return json_response(result)
