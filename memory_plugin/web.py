"""HTTP plumbing shared by every route: middlewares, body and parameter parsing.

Routes stay thin: they call these helpers to turn a request into typed
values, call a service, and render the result.  Errors raised anywhere are
rendered here, in the API's own format: OpenSearch's under ``/_plugins``
and the rest, Telnyx's ``errors`` list under ``/v2``.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from aiohttp import web
from aiohttp.typedefs import Middleware

from memory_plugin.auth import KeyStore, Principal
from memory_plugin.errors import (
    InvalidArgument,
    NotFound,
    ParseFailure,
    PayloadTooLarge,
    ServiceError,
    Unauthorized,
)

log = logging.getLogger("memory_plugin.http")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

MAX_BODY_BYTES = web.AppKey("max_body_bytes", int)
PRINCIPAL = web.RequestKey("principal", Principal)
REQUEST_ID = web.RequestKey("request_id", str)
#: Parameters OpenSearch accepts on every endpoint; clients send them.
GLOBAL_PARAMS = frozenset({"pretty", "human", "error_trace", "filter_path", "source", "source_content_type"})
#: The ceiling on JSON nesting, so that a hostile body cannot exhaust the stack.
MAX_JSON_DEPTH = 64


def _is_v2(request: web.Request) -> bool:
    """Telnyx-style errors under ``/v2``, also when mounted under a prefix."""
    return "/v2/" in request.path or request.path.endswith("/v2")


def principal_of(request: web.Request) -> Principal:
    return request[PRINCIPAL]


def json_response(body: Any, status: int = 200) -> web.Response:
    return web.Response(text=json.dumps(body, ensure_ascii=False), status=status, content_type="application/json")


def error_response(request: web.Request, error: ServiceError) -> web.Response:
    body = error.telnyx_body() if _is_v2(request) else error.opensearch_body()
    response = json_response(body, status=error.status)
    if isinstance(error, Unauthorized):
        response.headers["WWW-Authenticate"] = 'Bearer realm="memory-plugin", Basic realm="memory-plugin"'
    return response


@web.middleware
async def request_id_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    request_id = request.headers.get("X-Request-Id", "")[:128] or uuid.uuid4().hex
    request[REQUEST_ID] = request_id
    started = time.perf_counter()
    try:
        response = await handler(request)
    except web.HTTPException as exc:
        exc.headers["X-Request-Id"] = request_id
        raise
    response.headers["X-Request-Id"] = request_id
    log.info(
        "request",
        extra={
            "request_id": request_id,
            "method": request.method,
            "path": request.path,
            "status": response.status,
            "ms": round((time.perf_counter() - started) * 1000, 2),
        },
    )
    return response


@web.middleware
async def error_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except ServiceError as error:
        return error_response(request, error)
    except web.HTTPRequestEntityTooLarge:
        return error_response(
            request, PayloadTooLarge(f"request body is larger than {request.app[MAX_BODY_BYTES]} bytes")
        )
    except web.HTTPMethodNotAllowed as exc:
        allowed = ", ".join(sorted(exc.allowed_methods))
        wrong_method = InvalidArgument(
            f"Incorrect HTTP method for uri [{request.path}] and method [{request.method}], allowed: [{allowed}]"
        )
        response = error_response(request, wrong_method)
        response.set_status(405)
        return response
    except web.HTTPNotFound:
        return error_response(
            request,
            NotFound(
                "handler",
                request.path,
                reason=f"no handler found for uri [{request.path}] and method [{request.method}]",
            ),
        )
    except web.HTTPException:
        raise
    except Exception as exc:  # a bug: log it, and still answer in the API's format
        return _internal_error(request, exc)


def _internal_error(request: web.Request, exc: BaseException) -> web.Response:
    log.error("unhandled error", exc_info=exc, extra={"request_id": request.get(REQUEST_ID)})
    return error_response(request, ServiceError("internal error; the request id is in the X-Request-Id header"))


def auth_middleware(keys: KeyStore, public: Iterable[Handler] = ()) -> Middleware:
    """Every route needs a key except the ``public`` handlers (the health check)."""
    public = frozenset(public)

    @web.middleware
    async def authenticate(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.match_info.handler not in public:
            request[PRINCIPAL] = keys.authenticate(request.headers.get("Authorization"))
        return await handler(request)

    return authenticate


# -- request parsing ---------------------------------------------------------------


def check_params(request: web.Request, allowed: Iterable[str] = (), prefixes: Iterable[str] = ()) -> None:
    """Reject query parameters the endpoint does not know, as OpenSearch does."""
    known = GLOBAL_PARAMS | set(allowed)
    prefixes = tuple(prefixes)
    unknown = [name for name in request.query if name not in known and not name.startswith(prefixes or ("\0",))]
    if unknown:
        names = ", ".join(dict.fromkeys(unknown))
        if _is_v2(request):
            raise InvalidArgument(f"unknown query parameter [{names}]", parameter=unknown[0])
        raise InvalidArgument(
            f"request [{request.path}] contains unrecognized parameter: [{names}]", parameter=unknown[0]
        )


def int_param(request: web.Request, name: str, default: int) -> int:
    raw = request.query.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        value = None
    # Java's int, as OpenSearch parses it: anything wider is not a number there either.
    if value is None or not -(2**31) <= value < 2**31:
        raise InvalidArgument(f"Failed to parse int parameter [{name}] with value [{raw}]", parameter=name)
    return value


def float_param(request: web.Request, name: str) -> float | None:
    raw = request.query.get(name)
    if raw is None:
        return None
    try:
        value = float(raw)
    except ValueError:
        raise InvalidArgument(f"Failed to parse float parameter [{name}] with value [{raw}]", parameter=name) from None
    if value != value or value in (float("inf"), float("-inf")):
        raise InvalidArgument(f"[{name}] must be a finite number, not [{raw}]", parameter=name)
    return value


def _depth(value: Any, limit: int) -> int:
    """Nesting depth of a JSON value, iteratively, stopping past ``limit``."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            deepest = max(deepest, depth)
            if deepest > limit:
                return deepest
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return deepest


async def read_json(request: web.Request, *, required: bool) -> Any:
    """The body as JSON, or None when it is empty and not required."""
    try:
        raw = await request.read()
    except web.HTTPRequestEntityTooLarge:
        raise PayloadTooLarge(f"request body is larger than {request.app[MAX_BODY_BYTES]} bytes") from None
    if not raw.strip():
        if required:
            raise ParseFailure("request body is required")
        return None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ParseFailure(f"request body is not valid UTF-8 (byte {exc.start})") from None
    try:
        value = json.loads(text)
    except RecursionError:
        raise ParseFailure(f"request body nests deeper than {MAX_JSON_DEPTH} levels") from None
    except json.JSONDecodeError as exc:
        raise ParseFailure(f"Failed to parse request body: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    if _depth(value, MAX_JSON_DEPTH) > MAX_JSON_DEPTH:
        raise ParseFailure(f"request body nests deeper than {MAX_JSON_DEPTH} levels")
    return value


async def read_json_object(request: web.Request, *, required: bool) -> dict[str, Any] | None:
    value = await read_json(request, required=required)
    if value is not None and not isinstance(value, dict):
        raise ParseFailure(f"request body must be a JSON object, not {type(value).__name__}")
    return value


async def search_body(request: web.Request) -> dict[str, Any] | None:
    """A search body, or the ``source`` parameter that stands in for it (OpenSearch accepts both)."""
    body = await read_json(request, required=False)
    if body is None and "source" in request.query:
        try:
            body = json.loads(request.query["source"])
        except json.JSONDecodeError as exc:
            raise ParseFailure(f"Failed to parse [source] parameter: {exc.msg}", parameter="source") from None
    if body is not None and not isinstance(body, dict):
        raise ParseFailure("search body must be a JSON object", parameter="body")
    return body


def string_field(body: dict[str, Any], name: str, *, required: bool = False) -> str | None:
    if name not in body or body[name] is None:
        if required:
            raise InvalidArgument(f"[{name}] is required", parameter=name)
        return None
    value = body[name]
    if not isinstance(value, str):
        raise InvalidArgument(f"[{name}] must be a string, not {_json_type(value)}", parameter=name)
    return value


def check_fields(body: dict[str, Any], allowed: Iterable[str]) -> None:
    unknown = sorted(set(body) - set(allowed))
    if unknown:
        raise InvalidArgument(
            f"unknown field {unknown} in request body; known fields are {sorted(allowed)}", parameter=unknown[0]
        )


def _json_type(value: Any) -> str:
    return {bool: "boolean", int: "number", float: "number", dict: "object", list: "array"}.get(type(value), "null")
