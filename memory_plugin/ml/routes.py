"""HTTP routes of ml-commons' connector, model, task and predict APIs, thin over the service.

Literal segments (``_create``, ``_search``, ``_register``) are registered before
the routes with an id in their place, so they are never taken for ids.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from memory_plugin.auth import Principal
from memory_plugin.dsl import SearchBody, parse_search
from memory_plugin.dsl.mapping import Fields
from memory_plugin.errors import InvalidArgument, ParseFailure
from memory_plugin.http.body import parsed, read_body
from memory_plugin.http.json import json_response
from memory_plugin.http.middleware import principal_of
from memory_plugin.http.params import SEARCH_PARAMS, check_params
from memory_plugin.ml.connector_requests import parse_connector_input
from memory_plugin.ml.model_requests import parse_predict_input, parse_register_input, parse_undeploy_input
from memory_plugin.ml.requests import parse_body
from memory_plugin.ml.service import MLService
from memory_plugin.ml.views import (
    CONNECTOR_FIELDS,
    MODEL_FIELDS,
    TASK_FIELDS,
    connector_created_view,
    deployed_view,
    document_view,
    found_view,
    model_doc_view,
    predictions_view,
    registered_view,
    undeployed_view,
    written_view,
)

ML = web.AppKey("ml", MLService)
BASE = "/_plugins/_ml"
CONNECTORS = BASE + "/connectors"
MODELS = BASE + "/models"

routes = web.RouteTableDef()


async def _body(request: web.Request) -> Any:
    return await parsed(parse_body, await read_body(request))


async def _search_body(request: web.Request) -> Any:
    body = await _body(request)
    if body is None and "source" in request.query:
        body = parse_body(request.query["source"].encode("utf-8", "surrogatepass"))
    if body is None:
        raise ParseFailure("request body or source parameter is required")
    return body


async def _required_body(request: web.Request) -> Any:
    body = await _body(request)
    if body is None:
        raise ParseFailure("request body is required")
    return body


async def search_query(request: web.Request, fields: Fields) -> SearchBody:
    """A ``_search`` request's DSL body (or ``source`` parameter), parsed against the index's mapping."""
    if request.method not in ("GET", "POST"):
        raise web.HTTPMethodNotAllowed(request.method, ["GET", "POST"])
    check_params(request, SEARCH_PARAMS)
    return parse_search(await _search_body(request), fields=fields)


def caller_of(request: web.Request) -> tuple[MLService, Principal]:
    return request.config_dict[ML], principal_of(request)


def _ml(request: web.Request, params: tuple[str, ...] = ()) -> tuple[MLService, Principal]:
    """The service and the caller, once the query string holds no parameter but ``params``."""
    check_params(request, params)
    return caller_of(request)


# -- connectors ------------------------------------------------------------------------


@routes.post(CONNECTORS + "/_create")
async def create_connector(request: web.Request) -> web.Response:
    ml, caller = _ml(request)
    found = parse_connector_input(await _body(request))
    return json_response(connector_created_view(await ml.connectors.create(caller, found)))


@routes.route("*", CONNECTORS + "/_search")
async def search_connectors(request: web.Request) -> web.Response:
    query = await search_query(request, CONNECTOR_FIELDS)
    ml, caller = caller_of(request)
    return json_response(found_view(await ml.connectors.search(caller, query)))


@routes.get(CONNECTORS + "/{connector_id}")
async def get_connector(request: web.Request) -> web.Response:
    ml, caller = _ml(request)
    return json_response(document_view(await ml.connectors.get(caller, request.match_info["connector_id"])))


@routes.put(CONNECTORS + "/{connector_id}")
async def update_connector(request: web.Request) -> web.Response:
    ml, caller = _ml(request)
    update = parse_connector_input(await _body(request), update=True)
    written = await ml.connectors.update(caller, request.match_info["connector_id"], update)
    return json_response(written_view(written))


@routes.delete(CONNECTORS + "/{connector_id}")
async def delete_connector(request: web.Request) -> web.Response:
    ml, caller = _ml(request)
    return json_response(written_view(await ml.connectors.delete(caller, request.match_info["connector_id"])))


# -- models ----------------------------------------------------------------------------


@routes.post(MODELS + "/_register")
async def register_model(request: web.Request) -> web.Response:
    check_params(request, ("deploy",))
    deploy = request.query.get("deploy", "false")
    if deploy not in ("true", "false", ""):
        raise InvalidArgument(f"Failed to parse value [{deploy}] as only [true] or [false] are allowed.")
    ml, caller = _ml(request, ("deploy",))
    found = parse_register_input(await _required_body(request), deploy=deploy != "false")
    return json_response(registered_view(await ml.models.register(caller, found)))


@routes.route("*", MODELS + "/_search")
async def search_models(request: web.Request) -> web.Response:
    query = await search_query(request, MODEL_FIELDS)
    ml, caller = caller_of(request)
    return json_response(found_view(await ml.models.search(caller, query)))


@routes.post(MODELS + "/_undeploy")
async def undeploy_models(request: web.Request) -> web.Response:
    ml, caller = _ml(request)
    found = parse_undeploy_input(await _body(request))
    return json_response(undeployed_view(await ml.models.undeploy_many(caller, found)))


@routes.get(MODELS + "/{model_id}")
async def get_model(request: web.Request) -> web.Response:
    ml, caller = _ml(request)
    return json_response(model_doc_view(await ml.models.get(caller, request.match_info["model_id"])))


@routes.delete(MODELS + "/{model_id}")
async def delete_model(request: web.Request) -> web.Response:
    ml, caller = _ml(request)
    return json_response(written_view(await ml.models.delete(caller, request.match_info["model_id"])))


@routes.post(MODELS + "/{model_id}/_deploy")
async def deploy_model(request: web.Request) -> web.Response:
    ml, caller = _ml(request)
    return json_response(deployed_view(await ml.models.deploy(caller, request.match_info["model_id"])))


@routes.post(MODELS + "/{model_id}/_undeploy")
async def undeploy_model(request: web.Request) -> web.Response:
    ml, caller = _ml(request)
    return json_response(undeployed_view(await ml.models.undeploy(caller, request.match_info["model_id"])))


@routes.post(MODELS + "/{model_id}/_predict")
async def predict(request: web.Request) -> web.Response:
    ml, caller = _ml(request)
    found = parse_predict_input(await _required_body(request))
    return json_response(predictions_view(await ml.predictions.predict(caller, request.match_info["model_id"], found)))


@routes.post(BASE + "/_predict/{algorithm}/{model_id}")
async def predict_by_algorithm(request: web.Request) -> web.Response:
    algorithm = request.match_info["algorithm"]
    if algorithm.upper() != "TEXT_EMBEDDING":
        raise InvalidArgument(
            f"predict by algorithm is served for text_embedding here, not [{algorithm}]", parameter="algorithm"
        )
    ml, caller = _ml(request)
    found = parse_predict_input(await _required_body(request))
    predicted = await ml.predictions.predict(caller, request.match_info["model_id"], found, text_embedding=True)
    return json_response(predictions_view(predicted))


@routes.route("*", BASE + "/tasks/_search")
async def search_tasks(request: web.Request) -> web.Response:
    query = await search_query(request, TASK_FIELDS)
    ml, caller = caller_of(request)
    return json_response(found_view(await ml.tasks.search(caller, query)))


@routes.get(BASE + "/tasks/{task_id}")
async def get_task(request: web.Request) -> web.Response:
    ml, caller = _ml(request)
    return json_response(document_view(await ml.tasks.get(caller, request.match_info["task_id"])))


@routes.delete(BASE + "/tasks/{task_id}")
async def delete_task(request: web.Request) -> web.Response:
    ml, caller = _ml(request)
    return json_response(written_view(await ml.tasks.delete(caller, request.match_info["task_id"])))
