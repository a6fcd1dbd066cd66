"""HTTP routes of the agentic memory API (AGENTIC.md section 1's table), thin over the service.

Literal segments (``_create``, ``_search``, ``sessions``, ``_delete_by_query``,
``_semantic_search``, ``_hybrid_search``) are registered before the routes
with an id in their place, so they are never taken for ids.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from aiohttp import web
from aiohttp.typedefs import Handler

from memory_plugin.agentic.container_requests import (
    parse_container,
    parse_container_deletion,
    parse_container_search,
    parse_container_update,
)
from memory_plugin.agentic.memory_requests import (
    parse_add_memories,
    parse_delete_by_query,
    parse_long_term_search,
    parse_memory_search,
    parse_memory_update,
    parse_session,
)
from memory_plugin.agentic.models import BASE, LONG_TERM, parse_memory_type
from memory_plugin.agentic.requests import boolean
from memory_plugin.agentic.retention_views import dry_runs_view, plan_view, triggered_view
from memory_plugin.agentic.service import AgenticService
from memory_plugin.agentic.views import (
    added_view,
    by_query_view,
    container_view,
    created_container_view,
    deleted_memory_view,
    found_memory_view,
    hits_view,
    ranked_view,
    session_created_view,
    written_view,
)
from memory_plugin.errors import InvalidArgument, StatusBadRequest
from memory_plugin.http.body import read_body, read_json, read_json_object, search_body
from memory_plugin.http.json import json_response
from memory_plugin.http.middleware import principal_of
from memory_plugin.http.params import SEARCH_PARAMS, check_params

AGENTIC = web.AppKey("agentic", AgenticService)
CONTAINER = BASE + "/{memory_container_id}"
MEMORIES = CONTAINER + "/memories"
TYPED = MEMORIES + "/{memory_type}"

#: The path ids each kind of endpoint passes on, in the service's argument order.
CONTAINER_IDS = ("memory_container_id",)
TYPE_IDS = (*CONTAINER_IDS, "memory_type")
MEMORY_IDS = (*TYPE_IDS, "memory_id")

#: The methods of the search endpoints, which are routed for every method ("*") so that their literal
#: segments win over the ids in their place.
SEARCH_METHODS = ("GET", "POST")

#: Reads a request's body for the service.
BodyReader = Callable[[web.Request], Awaitable[Any]]

routes = web.RouteTableDef()


def _service(request: web.Request) -> AgenticService:
    return request.config_dict[AGENTIC]


def _search_methods(request: web.Request) -> None:
    if request.method not in SEARCH_METHODS:
        raise web.HTTPMethodNotAllowed(request.method, list(SEARCH_METHODS))


async def _object(request: web.Request) -> dict[str, Any] | None:
    return await read_json_object(request, required=False)


async def _json(request: web.Request) -> Any:
    return await read_json(request, required=False)


@web.middleware
async def enabled_only(request: web.Request, handler: Handler) -> web.StreamResponse:
    """The agentic sub-app's gate: while the API is off every endpoint answers ml-commons' 403, before its
    parameters or body are read (ml-commons checks the setting first).  A path or method no endpoint
    serves is still the router's 404 or 405, as OpenSearch's router answers those before any handler."""
    match = request.match_info
    routed = match.http_exception is None and (match.route.method != "*" or request.method in SEARCH_METHODS)
    if routed:
        _service(request).require_enabled()
    return await handler(request)


async def _answer(
    request: web.Request,
    call: Callable[..., Awaitable[dict[str, Any]]],
    ids: Sequence[str] = (),
    body: BodyReader | None = None,
    params: Sequence[str] = (),
) -> web.Response:
    """What every endpoint does: check the query parameters, then call the part of the service with the
    caller, the path ``ids`` and the body, and answer its result."""
    check_params(request, params)
    args: list[Any] = [request.match_info[name] for name in ids]
    if body is not None:
        args.append(await body(request))
    return json_response(await call(principal_of(request), *args))


# -- containers ----------------------------------------------------------------------------


@routes.post(BASE + "/_create")
async def create_container(request: web.Request) -> web.Response:
    check_params(request)
    containers = _service(request).containers
    body = parse_container(await _object(request), containers.retention_enabled)
    return json_response(created_container_view(await containers.create(principal_of(request), body)))


@routes.post(BASE + "/_retention/_execute")
async def execute_retention(request: web.Request) -> web.Response:
    check_params(request)
    if request.body_exists and await read_body(request):
        raise StatusBadRequest("_execute does not accept a request body; it always runs cluster-wide.")
    return json_response(triggered_view(await _service(request).retention.execute(principal_of(request))))


@routes.post(BASE + "/_retention/_dry_run")
async def dry_run_retention_everywhere(request: web.Request) -> web.Response:
    check_params(request)
    return json_response(dry_runs_view(await _service(request).retention.dry_run_all(principal_of(request))))


@routes.post(CONTAINER + "/_retention/_dry_run")
async def dry_run_retention(request: web.Request) -> web.Response:
    check_params(request)
    container_id = request.match_info["memory_container_id"]
    return json_response(plan_view(await _service(request).retention.dry_run(principal_of(request), container_id)))


@routes.route("*", BASE + "/_search")
async def search_containers(request: web.Request) -> web.Response:
    _search_methods(request)
    check_params(request, SEARCH_PARAMS)
    query = parse_container_search(await search_body(request))
    return json_response(hits_view(await _service(request).containers.search(principal_of(request), query)))


@routes.get(CONTAINER)
async def get_container(request: web.Request) -> web.Response:
    check_params(request)
    found = await _service(request).containers.get(principal_of(request), request.match_info["memory_container_id"])
    return json_response(container_view(found.source))


@routes.put(CONTAINER)
async def update_container(request: web.Request) -> web.Response:
    check_params(request)
    container_id = request.match_info["memory_container_id"]
    containers = _service(request).containers
    body = parse_container_update(await _object(request), containers.retention_enabled)
    return json_response(written_view(await containers.update(principal_of(request), container_id, body)))


@routes.delete(CONTAINER)
async def delete_container(request: web.Request) -> web.Response:
    check_params(request, ("delete_all_memories", "delete_memories"))
    container_id = request.match_info["memory_container_id"]
    body: dict[str, Any] = await _object(request) or {}
    options = {
        **body,
        **{name: request.query[name] for name in ("delete_all_memories", "delete_memories") if name in request.query},
    }
    deletion = parse_container_deletion(options)
    deleted = await _service(request).containers.delete(principal_of(request), container_id, deletion)
    return json_response(written_view(deleted))


# -- memories ------------------------------------------------------------------------------


@routes.post(MEMORIES)
async def add_memory(request: web.Request) -> web.Response:
    check_params(request)
    container_id = request.match_info["memory_container_id"]
    body = parse_add_memories(await _object(request))
    return json_response(added_view(await _service(request).memories.add(principal_of(request), container_id, body)))


@routes.post(MEMORIES + "/sessions")
async def create_session(request: web.Request) -> web.Response:
    check_params(request)
    container_id = request.match_info["memory_container_id"]
    body = parse_session(await _object(request))
    created = await _service(request).memories.create_session(principal_of(request), container_id, body)
    return json_response(session_created_view(created))


@routes.route("*", TYPED + "/_search")
async def search_memories(request: web.Request) -> web.Response:
    _search_methods(request)
    check_params(request, SEARCH_PARAMS)
    container_id, memory_type = (request.match_info[name] for name in TYPE_IDS)
    query = parse_memory_search(memory_type, await search_body(request))
    found = await _service(request).memories.search(principal_of(request), container_id, memory_type, query)
    return json_response(hits_view(found))


@routes.post(TYPED + "/_delete_by_query")
async def delete_by_query(request: web.Request) -> web.Response:
    check_params(request)
    container_id, memory_type = (request.match_info[name] for name in TYPE_IDS)
    body = parse_delete_by_query(memory_type, await _object(request))
    deleted = await _service(request).forgetting.delete_by_query(principal_of(request), container_id, body)
    return json_response(by_query_view(deleted))


async def _long_term_search(request: web.Request, *, hybrid: bool) -> web.Response:
    """Semantic and hybrid search: long-term memory only, and the type is not passed on."""
    _search_methods(request)
    check_params(request)
    memory_type = request.match_info["memory_type"]
    if parse_memory_type(memory_type) != LONG_TERM:
        raise InvalidArgument(
            f"Semantic and hybrid search are for long-term memory, not {memory_type}", parameter="type"
        )
    body = parse_long_term_search(await _object(request), hybrid=hybrid)
    searcher = _service(request).search
    search = searcher.hybrid if hybrid else searcher.semantic
    return json_response(
        ranked_view(await search(principal_of(request), request.match_info["memory_container_id"], body))
    )


@routes.route("*", TYPED + "/_semantic_search")
async def semantic_search(request: web.Request) -> web.Response:
    return await _long_term_search(request, hybrid=False)


@routes.route("*", TYPED + "/_hybrid_search")
async def hybrid_search(request: web.Request) -> web.Response:
    return await _long_term_search(request, hybrid=True)


@routes.get(TYPED + "/{memory_id}")
async def get_memory(request: web.Request) -> web.Response:
    """``?sources=true`` (ours) adds the working memories a long-term memory or history entry came from."""
    check_params(request, ("sources",))
    sources = boolean(dict(request.query), "sources", False) or False
    container_id, memory_type, memory_id = (request.match_info[name] for name in MEMORY_IDS)
    found = await _service(request).memories.get(principal_of(request), container_id, memory_type, memory_id, sources)
    return json_response(found_memory_view(found))


@routes.put(TYPED + "/{memory_id}")
async def update_memory(request: web.Request) -> web.Response:
    check_params(request)
    container_id, memory_type, memory_id = (request.match_info[name] for name in MEMORY_IDS)
    memories = _service(request).memories
    body = parse_memory_update(memory_type, await _json(request), memories.retention_enabled)
    return json_response(written_view(await memories.update(principal_of(request), container_id, memory_id, body)))


@routes.delete(TYPED + "/{memory_id}")
async def delete_memory(request: web.Request) -> web.Response:
    """``?report=true`` (ours) adds what the delete forgot to ml-commons' response (``forgotten``)."""
    check_params(request, ("report",))
    report = boolean(dict(request.query), "report", False) or False
    container_id, memory_type, memory_id = (request.match_info[name] for name in MEMORY_IDS)
    forgetting = _service(request).forgetting
    deleted = await forgetting.delete(principal_of(request), container_id, memory_type, memory_id, report)
    return json_response(deleted_memory_view(deleted))
