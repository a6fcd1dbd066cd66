"""HTTP routes of ml-commons' model group APIs and of the model update, thin over the services.

``_register`` and ``_search`` are registered before the routes with an id in their place.
"""

from __future__ import annotations

from aiohttp import web

from memory_plugin.http.json import json_response
from memory_plugin.ml.group_requests import parse_group_input
from memory_plugin.ml.model_groups import GROUP_FIELDS
from memory_plugin.ml.model_requests import parse_model_update
from memory_plugin.ml.routes import BASE, MODELS, _body, _ml, caller_of, search_query
from memory_plugin.ml.views import found_view, group_created_view, group_doc_view, group_updated_view, written_view

MODEL_GROUPS = BASE + "/model_groups"

routes = web.RouteTableDef()


@routes.post(MODEL_GROUPS + "/_register")
async def register_model_group(request: web.Request) -> web.Response:
    ml, caller = _ml(request)
    found = parse_group_input(await _body(request))
    return json_response(group_created_view(await ml.groups.register(caller, found)))


@routes.route("*", MODEL_GROUPS + "/_search")
async def search_model_groups(request: web.Request) -> web.Response:
    query = await search_query(request, GROUP_FIELDS)
    ml, caller = caller_of(request)
    return json_response(found_view(await ml.groups.search(caller, query)))


@routes.get(MODEL_GROUPS + "/{model_group_id}")
async def get_model_group(request: web.Request) -> web.Response:
    ml, caller = _ml(request)
    return json_response(group_doc_view(await ml.groups.get(caller, request.match_info["model_group_id"])))


@routes.put(MODEL_GROUPS + "/{model_group_id}")
async def update_model_group(request: web.Request) -> web.Response:
    ml, caller = _ml(request)
    found = parse_group_input(await _body(request))
    updated = await ml.groups.update(caller, request.match_info["model_group_id"], found)
    return json_response(group_updated_view(updated))


@routes.delete(MODEL_GROUPS + "/{model_group_id}")
async def delete_model_group(request: web.Request) -> web.Response:
    ml, caller = _ml(request)
    return json_response(written_view(await ml.groups.delete(caller, request.match_info["model_group_id"])))


@routes.put(MODELS + "/{model_id}")
async def update_a_model(request: web.Request) -> web.Response:
    ml, caller = _ml(request)
    update = parse_model_update(await _body(request))
    return json_response(written_view(await ml.models.update(caller, request.match_info["model_id"], update)))
