"""The ML Commons 2.11 conversational memory API (seed 000)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aiohttp import web

from memory_plugin.http.body import read_json_object, string_field
from memory_plugin.http.json import json_response
from memory_plugin.http.middleware import principal_of
from memory_plugin.http.params import check_params, int_param
from memory_plugin.memory.models import Interaction
from memory_plugin.memory.pages import RenderedPages
from memory_plugin.memory.service import DEFAULT_MAX_RESULTS, MemoryService
from memory_plugin.memory.views import conversation_v211, interaction_v211, page_v211

BASE = "/_plugins/_ml/memory/conversation"
PAGING = ("max_results", "next_token")
INTERACTION_FIELDS = ("input", "prompt_template", "response", "origin", "additional_info")
REQUIRED = ("input", "response")

routes = web.RouteTableDef()
MEMORY = web.AppKey("memory_service", MemoryService)
#: Rendered pages of messages, kept while their conversation is unchanged.
MESSAGE_PAGES = web.AppKey("message_pages", RenderedPages)


def paging(request: web.Request, *, number_format: bool = False) -> tuple[int, int]:
    """``next_token`` and ``max_results``: 2.11 read them with ``paramAsInt``, 2.12+ with ``Integer.parseInt``."""
    return (
        int_param(request, "next_token", 0, number_format=number_format),
        int_param(request, "max_results", DEFAULT_MAX_RESULTS, number_format=number_format),
    )


async def message_page(
    request: web.Request,
    conversation_id: str,
    window: tuple[int, int],
    *,
    newest_first: bool,
    name: str,
    view: Callable[[Interaction], dict[str, Any]],
) -> web.Response:
    """A page of a conversation's messages under ``name``, each shown by ``view``: kept while the conversation is unchanged.

    The key holds everything the body depends on: the caller (another caller's
    request never meets this page), the conversation, the window, the order and the form.
    """
    memory, owner, pages = request.config_dict[MEMORY], principal_of(request), request.config_dict[MESSAGE_PAGES]
    next_token, max_results = window
    # Before reading (see RenderedPages); not asked where no page is kept (it may cost a request).
    version = await memory.messages_version(conversation_id) if pages.keeps else None

    async def render() -> dict[str, Any]:
        page = await memory.list_interactions(owner, conversation_id, next_token, max_results, newest_first)
        return page_v211(name, page, view)

    key = (name, view, owner, conversation_id, next_token, max_results, newest_first)
    return await pages.json(key, version, render)


@routes.post(BASE)
async def create_conversation(request: web.Request) -> web.Response:
    check_params(request)
    body = await read_json_object(request, required=False) or {}
    name = string_field(body, "name") or ""
    conversation = await request.config_dict[MEMORY].create_conversation(principal_of(request), name=name)
    return json_response({"conversation_id": conversation.conversation_id})


@routes.get(BASE)
async def list_conversations(request: web.Request) -> web.Response:
    check_params(request, PAGING)
    next_token, max_results = paging(request)
    page = await request.config_dict[MEMORY].list_conversations(principal_of(request), next_token, max_results)
    return json_response(page_v211("conversations", page, conversation_v211))


@routes.post(BASE + "/{conversation_id}")
async def create_interaction(request: web.Request) -> web.Response:
    check_params(request)
    body = await read_json_object(request, required=True) or {}
    # Seed 000: input and response are not optional.
    fields = {name: string_field(body, name, required=name in REQUIRED) for name in INTERACTION_FIELDS}
    interaction = await request.config_dict[MEMORY].create_interaction(
        principal_of(request),
        request.match_info["conversation_id"],
        input=fields["input"],
        response=fields["response"],
        prompt_template=fields["prompt_template"],
        origin=fields["origin"],
        additional_info=fields["additional_info"],
    )
    return json_response({"interaction_id": interaction.interaction_id})


@routes.get(BASE + "/{conversation_id}")
async def list_interactions(request: web.Request) -> web.Response:
    check_params(request, PAGING)
    return await message_page(
        request,
        request.match_info["conversation_id"],
        paging(request),
        newest_first=True,
        name="interactions",
        view=interaction_v211,
    )


@routes.delete(BASE + "/{conversation_id}")
async def delete_conversation(request: web.Request) -> web.Response:
    check_params(request)
    await request.config_dict[MEMORY].delete_conversation(principal_of(request), request.match_info["conversation_id"])
    return json_response({"success": True})
