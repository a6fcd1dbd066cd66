"""``DELETE /v2/ai/conversation_histories?filter[...]``: delete matching records; ``filter[user_id]`` alone erases
those users in every API.  Registered right after the histories routes, on the same path."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from memory_plugin.erasure.service import ErasureService
from memory_plugin.histories.routes import BASE, filters_of
from memory_plugin.http.json import json_response
from memory_plugin.http.middleware import principal_of
from memory_plugin.http.params import check_params

ERASURE = web.AppKey("erasure_service", ErasureService)
routes = web.RouteTableDef()


@routes.delete(BASE)
async def delete_matching(request: web.Request) -> web.Response:
    check_params(request, prefixes=("filter[",))
    erased = await request.config_dict[ERASURE].delete_matching(principal_of(request), filters_of(request))
    data: dict[str, Any] = {
        "deleted_records": erased.records,
        "deleted_chunks": erased.chunks,
        "deleted_memories": erased.memories,
        "deleted_messages": erased.messages,
        "deleted_memory_containers": erased.memory_containers,
        "deleted_ml_documents": erased.ml_documents,
    }
    if erased.agentic_forgotten:  # what a user erasure found in the organisation's shared agentic containers
        data["forgotten_agentic_memories"] = erased.agentic_forgotten
    return json_response({"data": data})
