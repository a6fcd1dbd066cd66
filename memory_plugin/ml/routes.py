"""HTTP routes of ml-commons' connector, model, task and predict APIs, thin over the service.

Literal segments (``_create``, ``_search``, ``_register``) are registered before
the routes with an id in their place, so they are never taken for ids.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from aiohttp import web

from memory_plugin.errors import InvalidArgument, ParseFailure
from memory_plugin.http.body import parsed, read_body
from memory_plugin.http.json import json_response
from memory_plugin.http.middleware import principal_of
from memory_plugin.http.params import SEARCH_PARAMS, check_params
from memory_plugin.ml.requests import parse_body
from memory_plugin.ml.service import MLService

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


async def _answer(
    request: web.Request,
    call: Callable[..., Awaitable[dict[str, Any]]],
    ids: Sequence[str] = (),
    body: Callable[[web.Request], Awaitable[Any]] | None = None,
    params: Sequence[str] = (),
    **options: Any,
) -> web.Response:
    check_params(request, params)
    args: list[Any] = [request.match_info[name] for name in ids]
    if body is not None:
        args.append(await body(request))
    return json_response(await call(request.config_dict[ML], principal_of(request), *args, **options))


def _search_methods(request: web.Request) -> None:
    if request.method not in ("GET", "POST"):
        raise web.HTTPMethodNotAllowed(request.method, ["GET", "POST"])


# -- connectors ------------------------------------------------------------------------


@routes.post(CONNECTORS + "/_create")
async def create_connector(request: web.Request) -> web.Response:
    return await _answer(request, MLService.create_connector, body=_body)


@routes.route("*", CONNECTORS + "/_search")
async def search_connectors(request: web.Request) -> web.Response:
    _search_methods(request)
    return await _answer(request, MLService.search_connectors, body=_search_body, params=SEARCH_PARAMS)


@routes.get(CONNECTORS + "/{connector_id}")
async def get_connector(request: web.Request) -> web.Response:
    return await _answer(request, MLService.get_connector, ("connector_id",))


@routes.put(CONNECTORS + "/{connector_id}")
async def update_connector(request: web.Request) -> web.Response:
    return await _answer(request, MLService.update_connector, ("connector_id",), _body)


@routes.delete(CONNECTORS + "/{connector_id}")
async def delete_connector(request: web.Request) -> web.Response:
    return await _answer(request, MLService.delete_connector, ("connector_id",))


# -- models ----------------------------------------------------------------------------


@routes.post(MODELS + "/_register")
async def register_model(request: web.Request) -> web.Response:
    check_params(request, ("deploy",))
    deploy = request.query.get("deploy", "false")
    if deploy not in ("true", "false", ""):
        raise InvalidArgument(f"Failed to parse value [{deploy}] as only [true] or [false] are allowed.")
    return await _answer(request, MLService.register, body=_required_body, params=("deploy",), deploy=deploy != "false")


@routes.route("*", MODELS + "/_search")
async def search_models(request: web.Request) -> web.Response:
    _search_methods(request)
    return await _answer(request, MLService.search_models, body=_search_body, params=SEARCH_PARAMS)


@routes.post(MODELS + "/_undeploy")
async def undeploy_models(request: web.Request) -> web.Response:
    return await _answer(request, MLService.undeploy_many, body=_body)


@routes.get(MODELS + "/{model_id}")
async def get_model(request: web.Request) -> web.Response:
    return await _answer(request, MLService.get_model, ("model_id",))


@routes.delete(MODELS + "/{model_id}")
async def delete_model(request: web.Request) -> web.Response:
    return await _answer(request, MLService.delete_model, ("model_id",))


@routes.post(MODELS + "/{model_id}/_deploy")
async def deploy_model(request: web.Request) -> web.Response:
    return await _answer(request, MLService.deploy, ("model_id",))


@routes.post(MODELS + "/{model_id}/_undeploy")
async def undeploy_model(request: web.Request) -> web.Response:
    return await _answer(request, MLService.undeploy, ("model_id",))


@routes.post(MODELS + "/{model_id}/_predict")
async def predict(request: web.Request) -> web.Response:
    return await _answer(request, MLService.predict, ("model_id",), _required_body)


@routes.post(BASE + "/_predict/{algorithm}/{model_id}")
async def predict_by_algorithm(request: web.Request) -> web.Response:
    algorithm = request.match_info["algorithm"]
    if algorithm.upper() != "TEXT_EMBEDDING":
        raise InvalidArgument(
            f"predict by algorithm is served for text_embedding here, not [{algorithm}]", parameter="algorithm"
        )
    return await _answer(request, MLService.predict, ("model_id",), _required_body, text_embedding=True)


@routes.route("*", BASE + "/tasks/_search")
async def search_tasks(request: web.Request) -> web.Response:
    _search_methods(request)
    return await _answer(request, MLService.search_tasks, body=_search_body, params=SEARCH_PARAMS)


@routes.get(BASE + "/tasks/{task_id}")
async def get_task(request: web.Request) -> web.Response:
    return await _answer(request, MLService.get_task, ("task_id",))


@routes.delete(BASE + "/tasks/{task_id}")
async def delete_task(request: web.Request) -> web.Response:
    return await _answer(request, MLService.delete_task, ("task_id",))
