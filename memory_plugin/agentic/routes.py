"""HTTP routes of the agentic memory API (AGENTIC.md section 1's table), thin over the service.

Literal segments (``_create``, ``_search``, ``sessions``, ``_delete_by_query``,
``_semantic_search``, ``_hybrid_search``) are registered before the routes
with an id in their place, so they are never taken for ids.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from memory_plugin.agentic.models import BASE, LONG_TERM, boolean, parse_memory_type
from memory_plugin.agentic.service import AgenticService
from memory_plugin.errors import InvalidArgument
from memory_plugin.web import (
    SEARCH_PARAMS,
    check_params,
    json_response,
    principal_of,
    read_json,
    read_json_object,
    search_body,
)

AGENTIC = web.AppKey("agentic", AgenticService)
CONTAINER = BASE + "/{memory_container_id}"
MEMORIES = CONTAINER + "/memories"
TYPED = MEMORIES + "/{memory_type}"

routes = web.RouteTableDef()


def _service(request: web.Request) -> AgenticService:
    return request.app[AGENTIC]


def _ids(request: web.Request, *names: str) -> list[str]:
    return [request.match_info[name] for name in names]


def _search_methods(request: web.Request) -> None:
    if request.method not in ("GET", "POST"):
        raise web.HTTPMethodNotAllowed(request.method, ["GET", "POST"])


# -- containers ----------------------------------------------------------------------------


@routes.post(BASE + "/_create")
async def create_container(request: web.Request) -> web.Response:
    check_params(request)
    body = await read_json_object(request, required=False)
    return json_response(await _service(request).create_container(principal_of(request), body))


@routes.route("*", BASE + "/_search")
async def search_containers(request: web.Request) -> web.Response:
    _search_methods(request)
    check_params(request, SEARCH_PARAMS)
    return json_response(await _service(request).search_containers(principal_of(request), await search_body(request)))


@routes.get(CONTAINER)
async def get_container(request: web.Request) -> web.Response:
    check_params(request)
    (container_id,) = _ids(request, "memory_container_id")
    return json_response(await _service(request).get_container(principal_of(request), container_id))


@routes.put(CONTAINER)
async def update_container(request: web.Request) -> web.Response:
    check_params(request)
    (container_id,) = _ids(request, "memory_container_id")
    body = await read_json_object(request, required=False)
    return json_response(await _service(request).update_container(principal_of(request), container_id, body))


@routes.delete(CONTAINER)
async def delete_container(request: web.Request) -> web.Response:
    check_params(request, ("delete_all_memories", "delete_memories"))
    (container_id,) = _ids(request, "memory_container_id")
    body: dict[str, Any] = await read_json_object(request, required=False) or {}
    options = {
        **body,
        **{name: request.query[name] for name in ("delete_all_memories", "delete_memories") if name in request.query},
    }
    delete_all = boolean(options, "delete_all_memories", False) or False
    raw_types = options.get("delete_memories")
    if isinstance(raw_types, str):
        types = raw_types.split(",")
    elif isinstance(raw_types, list) and all(isinstance(item, str) for item in raw_types):
        types = raw_types
    elif raw_types is None:
        types = []
    else:
        raise InvalidArgument(
            "[delete_memories] must be a comma-separated list of memory types", parameter="delete_memories"
        )
    return json_response(
        await _service(request).delete_container(principal_of(request), container_id, delete_all, types)
    )


# -- memories ------------------------------------------------------------------------------


@routes.post(MEMORIES)
async def add_memory(request: web.Request) -> web.Response:
    check_params(request)
    (container_id,) = _ids(request, "memory_container_id")
    body = await read_json_object(request, required=False)
    return json_response(await _service(request).add_memory(principal_of(request), container_id, body))


@routes.post(MEMORIES + "/sessions")
async def create_session(request: web.Request) -> web.Response:
    check_params(request)
    (container_id,) = _ids(request, "memory_container_id")
    body = await read_json_object(request, required=False)
    return json_response(await _service(request).create_session(principal_of(request), container_id, body))


@routes.route("*", TYPED + "/_search")
async def search_memories(request: web.Request) -> web.Response:
    _search_methods(request)
    check_params(request, SEARCH_PARAMS)
    container_id, memory_type = _ids(request, "memory_container_id", "memory_type")
    body = await search_body(request)
    return json_response(
        await _service(request).search_memories(principal_of(request), container_id, memory_type, body)
    )


@routes.post(TYPED + "/_delete_by_query")
async def delete_by_query(request: web.Request) -> web.Response:
    check_params(request)
    container_id, memory_type = _ids(request, "memory_container_id", "memory_type")
    body = await read_json_object(request, required=False)
    return json_response(
        await _service(request).delete_by_query(principal_of(request), container_id, memory_type, body)
    )


def _long_term_only(memory_type: str) -> None:
    if parse_memory_type(memory_type) != LONG_TERM:
        raise InvalidArgument(
            f"Semantic and hybrid search are for long-term memory, not {memory_type}", parameter="type"
        )


@routes.route("*", TYPED + "/_semantic_search")
async def semantic_search(request: web.Request) -> web.Response:
    _search_methods(request)
    check_params(request)
    container_id, memory_type = _ids(request, "memory_container_id", "memory_type")
    _long_term_only(memory_type)
    body = await read_json_object(request, required=False)
    return json_response(await _service(request).semantic_search(principal_of(request), container_id, body))


@routes.route("*", TYPED + "/_hybrid_search")
async def hybrid_search(request: web.Request) -> web.Response:
    _search_methods(request)
    check_params(request)
    container_id, memory_type = _ids(request, "memory_container_id", "memory_type")
    _long_term_only(memory_type)
    body = await read_json_object(request, required=False)
    return json_response(await _service(request).hybrid_search(principal_of(request), container_id, body))


@routes.get(TYPED + "/{memory_id}")
async def get_memory(request: web.Request) -> web.Response:
    check_params(request)
    ids = _ids(request, "memory_container_id", "memory_type", "memory_id")
    return json_response(await _service(request).get_memory(principal_of(request), *ids))


@routes.put(TYPED + "/{memory_id}")
async def update_memory(request: web.Request) -> web.Response:
    check_params(request)
    container_id, memory_type, memory_id = _ids(request, "memory_container_id", "memory_type", "memory_id")
    body = await read_json(request, required=False)
    return json_response(
        await _service(request).update_memory(principal_of(request), container_id, memory_type, memory_id, body)
    )


@routes.delete(TYPED + "/{memory_id}")
async def delete_memory(request: web.Request) -> web.Response:
    check_params(request)
    ids = _ids(request, "memory_container_id", "memory_type", "memory_id")
    return json_response(await _service(request).delete_memory(principal_of(request), *ids))
