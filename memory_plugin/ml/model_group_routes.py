"""HTTP routes of ml-commons' model group APIs and of the model update, thin over the services.

``_register`` and ``_search`` are registered before the routes with an id in their place.
"""

from __future__ import annotations

from aiohttp import web

from memory_plugin.http.json import json_response
from memory_plugin.http.middleware import principal_of
from memory_plugin.http.params import SEARCH_PARAMS, check_params
from memory_plugin.ml.model_update import update_model
from memory_plugin.ml.routes import BASE, ML, MODELS, _body, _search_body, _search_methods

MODEL_GROUPS = BASE + "/model_groups"

routes = web.RouteTableDef()


@routes.post(MODEL_GROUPS + "/_register")
async def register_model_group(request: web.Request) -> web.Response:
    check_params(request, ())
    ml = request.config_dict[ML]
    return json_response(await ml.groups.register(principal_of(request), await _body(request)))


@routes.route("*", MODEL_GROUPS + "/_search")
async def search_model_groups(request: web.Request) -> web.Response:
    _search_methods(request)
    check_params(request, SEARCH_PARAMS)
    ml = request.config_dict[ML]
    return json_response(await ml.groups.search(principal_of(request), await _search_body(request)))


@routes.get(MODEL_GROUPS + "/{model_group_id}")
async def get_model_group(request: web.Request) -> web.Response:
    check_params(request, ())
    ml = request.config_dict[ML]
    return json_response(await ml.groups.get(principal_of(request), request.match_info["model_group_id"]))


@routes.put(MODEL_GROUPS + "/{model_group_id}")
async def update_model_group(request: web.Request) -> web.Response:
    check_params(request, ())
    ml = request.config_dict[ML]
    group_id = request.match_info["model_group_id"]
    return json_response(await ml.groups.update(principal_of(request), group_id, await _body(request)))


@routes.delete(MODEL_GROUPS + "/{model_group_id}")
async def delete_model_group(request: web.Request) -> web.Response:
    check_params(request, ())
    ml = request.config_dict[ML]
    return json_response(await ml.groups.delete(principal_of(request), request.match_info["model_group_id"]))


@routes.put(MODELS + "/{model_id}")
async def update_a_model(request: web.Request) -> web.Response:
    check_params(request, ())
    ml = request.config_dict[ML]
    return json_response(
        await update_model(ml, principal_of(request), request.match_info["model_id"], await _body(request))
    )
