"""The ML Commons 2.12+ memory API: memories and messages (CONTRACT section 2).

The same service and stored data as the 2.11 form, under the names that
``opensearch-py``'s ``plugins.ml`` client and dashboards-assistant use.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from aiohttp import web

from memory_plugin.dsl import MESSAGE_INDEX, META_INDEX
from memory_plugin.errors import NotFound, ParseFailure
from memory_plugin.http.body import parsed, read_body, search_body
from memory_plugin.http.json import check_sound, json_response
from memory_plugin.http.middleware import principal_of
from memory_plugin.http.params import SEARCH_PARAMS, check_params
from memory_plugin.memory import requests_v212
from memory_plugin.memory.models import Updated
from memory_plugin.memory.routes_v211 import MEMORY, PAGING, message_page, paging
from memory_plugin.memory.service import check_search_window
from memory_plugin.memory.views import memory_v212, message_v212, page_v211

T = TypeVar("T")

BASE = "/_plugins/_ml/memory"

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
            if error.kind not in NOUNS or error.reason != NotFound(error.kind, error.id).reason:
                raise  # not ours to reword, or worded already
            reason = f"{NOUNS[error.kind]} [{error.id}] not found"
            raise NotFound(error.kind, error.id, reason=reason, parameter=error.parameter) from None

    wrapper.__name__ = handler.__name__
    wrapper.__doc__ = handler.__doc__
    return wrapper


def _update_response(index: str, document_id: str, updated: Updated[Any]) -> dict[str, Any]:
    """OpenSearch's update response; ``noop`` when nothing changed, as ml-commons reports it."""
    version = updated.document.version
    body: dict[str, Any] = {"_index": index, "_id": document_id, "_version": version, "result": updated.result}
    written = updated.result == "updated"
    if written:
        body["forced_refresh"] = True
    body["_shards"] = {"total": int(written), "successful": int(written), "failed": 0}
    body["_seq_no"] = version - 1  # per document here: it orders this document's writes, as OpenSearch's does
    body["_primary_term"] = 1
    return body


def _window(request: web.Request, noun: str, index: str) -> tuple[int, int]:
    """A page's ``next_token`` and ``max_results``, checked as the search that 2.12+ pages with checks them."""
    check_params(request, PAGING)
    next_token, max_results = paging(request, number_format=True)
    check_search_window(next_token, max_results, noun, index)
    return next_token, max_results


def _sound_fields(request: Any) -> None:
    check_sound(request.__dict__)


async def _query_body(request: web.Request) -> dict[str, Any] | None:
    """A ``_search`` request's body: GET or POST, as OpenSearch takes either."""
    if request.method not in ("GET", "POST"):
        raise web.HTTPMethodNotAllowed(request.method, ["GET", "POST"])
    raw = await read_body(request)
    if not raw and "source" not in request.query:
        # RestRequest.contentOrSourceParamParser, before any parameter is checked (so also with ?q=)
        raise ParseFailure("request body or source parameter is required")
    check_params(request, SEARCH_PARAMS)
    try:
        return await search_body(request)
    except ParseFailure:
        if raw:
            await parsed(requests_v212.check_search_syntax, raw)
        raise


async def _update(request: web.Request, kind: str, id_name: str, index: str) -> web.Response:
    """Apply an update's body, read as ml-commons reads it; answer as OpenSearch's update API does."""
    check_params(request)
    changes = await parsed(requests_v212.update, await read_body(request), kind, check=check_sound)
    document_id = request.match_info[id_name]
    service = request.config_dict[MEMORY]
    update = service.update_interaction if kind == "interaction" else service.update_conversation
    updated = await update(principal_of(request), document_id, changes)
    return json_response(_update_response(index, document_id, updated))


# -- memories -------------------------------------------------------------------------


@routes.post(BASE)
@renamed
async def create_memory(request: web.Request) -> web.Response:
    check_params(request)
    memory = await parsed(requests_v212.new_memory, await read_body(request), check=_sound_fields)
    conversation = await request.config_dict[MEMORY].create_conversation(
        principal_of(request),
        name=memory.name,
        additional_info=memory.additional_info,
        application_type=memory.application_type,
    )
    return json_response({"memory_id": conversation.conversation_id})


@routes.get(BASE)
@renamed
async def list_memories(request: web.Request) -> web.Response:
    next_token, max_results = _window(request, "conversations", META_INDEX)
    page = await request.config_dict[MEMORY].list_conversations(
        principal_of(request), next_token, max_results, by="updated_time"
    )
    return json_response(page_v211("memories", page, memory_v212))


@routes.route("*", BASE + "/_search")
@renamed
async def search_memories(request: web.Request) -> web.Response:
    result = await request.config_dict[MEMORY].search_conversations(principal_of(request), await _query_body(request))
    return json_response(result)


@routes.get(BASE + "/message/{message_id}")
@renamed
async def get_message(request: web.Request) -> web.Response:
    check_params(request)
    interaction = await request.config_dict[MEMORY].get_interaction(
        principal_of(request), request.match_info["message_id"]
    )
    return json_response(message_v212(interaction))


@routes.put(BASE + "/message/{message_id}")
@renamed
async def update_message(request: web.Request) -> web.Response:
    try:
        return await _update(request, "interaction", "message_id", MESSAGE_INDEX)
    except NotFound as error:  # ml-commons' update words it in lower case
        raise NotFound("interaction", error.id, reason=f"message [{error.id}] not found") from None


@routes.get(BASE + "/message/{message_id}/traces")
@renamed
async def list_traces(request: web.Request) -> web.Response:
    next_token, max_results = _window(request, "traces", MESSAGE_INDEX)
    page = await request.config_dict[MEMORY].list_traces(
        principal_of(request), request.match_info["message_id"], next_token, max_results
    )
    return json_response(page_v211("traces", page, message_v212))


@routes.get(BASE + "/{memory_id}")
@renamed
async def get_memory(request: web.Request) -> web.Response:
    check_params(request)
    conversation = await request.config_dict[MEMORY].get_conversation(
        principal_of(request), request.match_info["memory_id"]
    )
    return json_response(memory_v212(conversation))


@routes.put(BASE + "/{memory_id}")
@renamed
async def update_memory(request: web.Request) -> web.Response:
    return await _update(request, "conversation", "memory_id", META_INDEX)


@routes.delete(BASE + "/{memory_id}")
@renamed
async def delete_memory(request: web.Request) -> web.Response:
    check_params(request)
    await request.config_dict[MEMORY].delete_conversation(principal_of(request), request.match_info["memory_id"])
    return json_response({"success": True})


# -- messages -------------------------------------------------------------------------


@routes.post(BASE + "/{memory_id}/messages")
@renamed
async def create_message(request: web.Request) -> web.Response:
    check_params(request)
    message = await parsed(requests_v212.new_message, await read_body(request), check=_sound_fields)
    interaction = await request.config_dict[MEMORY].create_interaction(
        principal_of(request),
        request.match_info["memory_id"],
        input=message.input,
        prompt_template=message.prompt_template,
        response=message.response,
        origin=message.origin,
        additional_info=message.additional_info,
        parent_interaction_id=message.parent_message_id,
        trace_number=message.trace_number,
    )
    return json_response({"message_id": interaction.interaction_id})


@routes.get(BASE + "/{memory_id}/messages")
@renamed
async def list_messages(request: web.Request) -> web.Response:
    return await message_page(
        request,
        request.match_info["memory_id"],
        _window(request, "interactions", MESSAGE_INDEX),
        newest_first=False,
        name="messages",
        view=message_v212,
    )


@routes.route("*", BASE + "/{memory_id}/_search")
@renamed
async def search_messages(request: web.Request) -> web.Response:
    body = await _query_body(request)
    result = await request.config_dict[MEMORY].search_interactions(
        principal_of(request), request.match_info["memory_id"], body
    )
    return json_response(result)
