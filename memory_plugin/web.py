"""HTTP plumbing shared by every route: middlewares, body and parameter parsing.

Routes stay thin: they call these helpers to turn a request into typed
values, call a service, and render the result.  Errors raised anywhere are
rendered here, in the API's own format: Telnyx's ``errors`` list in the
``/v2`` sub-app, OpenSearch's everywhere else (the sub-app says, see ``API``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import random
import re
import sys
import time
import urllib.parse
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable, Iterable
from typing import Any

from aiohttp import web
from aiohttp.typedefs import Middleware

from memory_plugin.auth import KeyStore, Principal
from memory_plugin.errors import (
    InvalidArgument,
    NotFound,
    OpenSearchBadRequest,
    ParseFailure,
    PayloadTooLarge,
    RequestTimeout,
    ServiceError,
    Unauthorized,
)
from memory_plugin.metrics import Metrics
from memory_plugin.opensearch_rest import JSON_MEDIA_TYPES, RESPONSE_PARAMS, filter_path, java_int, unrecognized

log = logging.getLogger("memory_plugin.http")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

MAX_BODY_BYTES = web.AppKey("max_body_bytes", int)
#: Seconds a client may take to send the whole body before it gets a 408.
BODY_READ_TIMEOUT = web.AppKey("body_read_timeout", float)
PRINCIPAL = web.RequestKey("principal", Principal)
REQUEST_ID = web.RequestKey("request_id", str)
#: Parameters OpenSearch accepts on every endpoint; clients send them.
#: A search may carry its body in the ``source`` parameter instead.
SEARCH_PARAMS = ("source", "source_content_type")
GLOBAL_PARAMS = frozenset({"pretty", "human", "error_trace", "filter_path", "source", "source_content_type"})
#: The ceiling on JSON nesting, so that a hostile body cannot exhaust the stack.
MAX_JSON_DEPTH = 64
#: Python's own ceiling on converting digits to an int (``sys.get_int_max_str_digits``).
MAX_INT_DIGITS = 4300
#: Query-parameter numbers: ASCII digits only (no ``+``, ``_``, spaces or other scripts' digits).
INTEGER = re.compile(r"-?[0-9]{1,20}")
DECIMAL = re.compile(r"-?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]{1,4})?")
#: What a request id may be: printable ASCII, so that it is safe in headers and logs.
REQUEST_ID_PATTERN = re.compile(r"[!-~]{1,128}")


#: The API a sub-app serves: ``"v2"`` (Telnyx-style ``errors`` and parameter rules) or
#: ``"opensearch"``.  The innermost sub-app that names one decides, so an id or a mount
#: prefix that reads ``v2`` never changes the format (issue 22).
API = web.AppKey("api", str)


def _is_v2(request: web.Request) -> bool:
    for app in reversed(request.match_info.apps):
        api = app.get(API)
        if api is not None:
            return api == "v2"
    return False


def principal_of(request: web.Request) -> Principal:
    return request[PRINCIPAL]


def json_response(body: Any, status: int = 200) -> web.Response:
    return web.Response(body=encode_json(body), status=status, content_type="application/json")


#: Built once; our bodies are trees of fresh dicts and lists, never circular, so nothing tracks visits.
_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, check_circular=False)


def encode_json(body: Any) -> bytes:
    """Strict JSON as UTF-8, whatever the body holds.

    ``Infinity`` and ``NaN`` are not JSON, and most clients refuse them: an
    infinite float becomes the largest finite double of its sign (so that
    scores keep their order) and NaN becomes null.  A lone surrogate cannot be
    encoded as UTF-8; one stored before the edge refused them is written as
    its JSON escape (``\\ud800``), so that the record can still be read and deleted.
    """
    try:
        text = _ENCODER.encode(body)
    except ValueError:
        text = _ENCODER.encode(_finite(body))
    try:
        return text.encode()
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace")


class RenderedPages:
    """Response bodies by key, each kept with the version of the data it shows: OpenSearch's
    request cache in miniature, for the pages agents read again and again.

    A page is served only at the version it was rendered at, so a write that
    moves the version retires it.  The reader must take the version *before*
    it reads (a write that lands in between then only retires the page early).
    Least recently used pages go first once the bodies pass ``max_bytes``; a
    body over an eighth of that is never kept.
    """

    #: What a kept page costs beyond its body (its key's tuple and strings, the entry, the links),
    #: counted generously so that a caller asking for thousands of tiny pages stays within the budget.
    OVERHEAD = 512

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.size = 0
        self._pages: OrderedDict[Hashable, tuple[int, bytes]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._pages)

    def get(self, key: Hashable, version: int | None) -> bytes | None:
        found = self._pages.get(key) if version is not None else None
        if found is None or found[0] != version:
            return None
        self._pages.move_to_end(key)
        return found[1]

    def put(self, key: Hashable, version: int | None, body: bytes) -> None:
        cost = len(body) + self.OVERHEAD
        if version is None or cost > self.max_bytes // 8:
            return
        old = self._pages.pop(key, None)
        if old is not None:
            self.size -= len(old[1]) + self.OVERHEAD
        self._pages[key] = (version, body)
        self.size += cost
        while self.size > self.max_bytes:
            _, (_, dropped) = self._pages.popitem(last=False)
            self.size -= len(dropped) + self.OVERHEAD

    async def json(self, key: Hashable, version: int | None, render: Callable[[], Awaitable[Any]]) -> web.Response:
        """The page under ``key`` at ``version``, rendered by ``render`` unless kept."""
        body = self.get(key, version)
        if body is None:
            body = encode_json(await render())
            self.put(key, version, body)
        return web.Response(body=body, content_type="application/json")


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None if math.isnan(value) else math.copysign(sys.float_info.max, value)
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(item) for item in value]
    return value


def error_response(request: web.Request, error: ServiceError) -> web.Response:
    body = error.telnyx_body() if _is_v2(request) else error.opensearch_body()
    response = json_response(body, status=error.status)
    if isinstance(error, Unauthorized):
        response.headers["WWW-Authenticate"] = 'Bearer realm="memory-plugin", Basic realm="memory-plugin"'
    if isinstance(error, RequestTimeout):
        response.force_close()
    return response


def front_door(keys: KeyStore, metrics: Metrics, public: Iterable[Handler] = ()) -> Middleware:
    """Everything every request needs around its handler, in one middleware: one frame per request, not six.

    Outermost first: a request id (``X-Request-Id``, on errors too), the request's
    metrics and log line, then errors in the API's own format around the key
    check (every route but the ``public`` handlers needs one), strict text in the
    URL, the handler, and ``filter_path``.
    """
    public = frozenset(public)

    @web.middleware
    async def serve(request: web.Request, handler: Handler) -> web.StreamResponse:
        request_id = request.headers.get("X-Request-Id", "")
        if not REQUEST_ID_PATTERN.fullmatch(request_id):
            request_id = f"{random.getrandbits(128):032x}"  # a label for logs, not a secret: no system call for it
        request[REQUEST_ID] = request_id
        started = time.perf_counter()
        status = 500
        try:
            response = await _answer(request, handler, keys, public)
            status = response.status
        except web.HTTPException as exc:
            status = exc.status
            exc.headers["X-Request-Id"] = request_id
            raise
        finally:
            metrics.observe_request(request, status, time.perf_counter() - started)
        response.headers["X-Request-Id"] = request_id
        if log.isEnabledFor(logging.INFO):
            log.info(
                "request",
                extra={
                    "request_id": request_id,
                    "method": request.method,
                    "path": request.path,
                    "status": status,
                    "ms": round((time.perf_counter() - started) * 1000, 2),
                },
            )
        return response

    return serve


async def _answer(
    request: web.Request, handler: Handler, keys: KeyStore, public: frozenset[Handler]
) -> web.StreamResponse:
    """The handler's answer, or the error it raised as the API words it."""
    try:
        if request.match_info.handler not in public:
            request[PRINCIPAL] = keys.authenticate(request.headers.get("Authorization"))
        check_text(request)
        return _filter_path(request, await handler(request))
    except ServiceError as error:
        return error_response(request, error)
    except web.HTTPRequestEntityTooLarge:
        return error_response(
            request, PayloadTooLarge(f"request body is larger than {request.config_dict[MAX_BODY_BYTES]} bytes")
        )
    except UnsupportedContentType as exc:
        if _is_v2(request):
            return error_response(request, ParseFailure(f"Content-Type header [{exc}] is not supported"))
        return json_response({"error": f"Content-Type header [{exc}] is not supported", "status": 406}, status=406)
    except web.HTTPMethodNotAllowed as exc:
        allowed = ", ".join(sorted(exc.allowed_methods - {"HEAD"}))
        reason = (
            f"Incorrect HTTP method for uri [{request.raw_path}] and method [{request.method}], allowed: [{allowed}]"
        )
        if _is_v2(request):
            response = error_response(request, InvalidArgument(reason))
            response.set_status(405)
            return response
        return json_response({"error": reason, "status": 405}, status=405)
    except web.HTTPNotFound as exc:
        if request.match_info.http_exception is None:  # a route matched and answered 404 itself
            return error_response(request, NotFound("resource", request.path, reason=exc.text or "not found"))
        reason = f"no handler found for uri [{request.raw_path}] and method [{request.method}]"
        if _is_v2(request):
            return error_response(request, NotFound("handler", request.path, reason=reason))
        return json_response({"error": reason}, status=400)
    except web.HTTPException:
        raise
    except Exception as exc:  # a bug: log it, and still answer in the API's format
        return _internal_error(request, exc)


def _filter_path(request: web.Request, response: web.StreamResponse) -> web.StreamResponse:
    """``filter_path`` trims successful JSON answers under ``/_plugins``, as OpenSearch does (errors stay whole)."""
    expression = request.query.get("filter_path")
    if (
        expression is None
        or _is_v2(request)
        or not isinstance(response, web.Response)
        or response.status >= 300
        or response.content_type != "application/json"
        or response.body is None
    ):
        return response
    assert isinstance(response.body, bytes)
    trimmed = filter_path(json.loads(response.body), expression)
    return web.Response(body=encode_json(trimmed), status=response.status, content_type="application/json")


def _internal_error(request: web.Request, exc: BaseException) -> web.Response:
    log.error("unhandled error", exc_info=exc, extra={"request_id": request.get(REQUEST_ID)})
    return error_response(request, ServiceError("internal error; the request id is in the X-Request-Id header"))


def check_text(request: web.Request) -> None:
    """Query parameters and path parts must be valid Unicode text, like JSON bodies."""
    raw_query = request.rel_url.raw_query_string
    if raw_query and not (raw_query.isascii() and "%" not in raw_query):  # else every name and value is ASCII
        if any("\ufffd" in name or "\ufffd" in value for name, value in request.query.items()):
            _check_query_encoding(request)
        for name, value in request.query.items():
            if has_lone_surrogate(name):
                raise InvalidArgument(
                    f"a query parameter name {_printable(name)} holds a lone surrogate", parameter=_printable(name)
                )
            if has_lone_surrogate(value):
                raise InvalidArgument(f"[{name}] holds a lone surrogate; it must be valid Unicode text", parameter=name)
    for name, value in request.match_info.items():
        if has_lone_surrogate(value):
            raise InvalidArgument(f"[{name}] holds a lone surrogate; it must be valid Unicode text", parameter=name)


def _check_query_encoding(request: web.Request) -> None:
    """The query string as sent must be UTF-8: the parser replaced what was not with U+FFFD."""
    for pair in request.rel_url.raw_query_string.split("&"):
        raw_name, _, raw_value = pair.partition("=")
        name = urllib.parse.unquote(raw_name.replace("+", " "), errors="replace")
        for part in (raw_name, raw_value):
            try:
                urllib.parse.unquote_to_bytes(part.replace("+", " ")).decode("utf-8")
            except UnicodeDecodeError:
                raise InvalidArgument(f"[{name}] is not valid UTF-8 once percent-decoded", parameter=name) from None


def has_lone_surrogate(text: str) -> bool:
    """Whether ``text`` holds half of a UTF-16 pair (``"\\ud800"``): not text, and not encodable as UTF-8.

    Encoding is the fast test (a regex over the surrogate range is a hundred times slower).
    """
    if text.isascii():
        return False
    try:
        text.encode()
    except UnicodeEncodeError:
        return True
    return False


def _printable(text: str) -> str:
    """``text`` with lone surrogates written as escapes, so that it can go into a response."""
    return text.encode("utf-8", "backslashreplace").decode()


# -- request parsing ---------------------------------------------------------------


def check_params(request: web.Request, allowed: Iterable[str] = (), prefixes: Iterable[str] = ()) -> None:
    """Reject query parameters the endpoint does not know, as OpenSearch does."""
    if not request.query:
        return
    prefixes = tuple(prefixes)
    if _is_v2(request):
        known = GLOBAL_PARAMS | set(allowed)
        unknown = [name for name in request.query if name not in known and not name.startswith(prefixes or ("\0",))]
        if unknown:
            names = ", ".join(dict.fromkeys(unknown))
            raise InvalidArgument(f"unknown query parameter [{names}]", parameter=unknown[0])
        return
    read = RESPONSE_PARAMS | set(request.match_info)  # what OpenSearch's handler reads, and so suggests
    known = read | set(allowed)
    unknown = [name for name in request.query if name not in known and not name.startswith(prefixes or ("\0",))]
    if unknown:
        raise InvalidArgument(unrecognized(request.path, unknown, read), parameter=sorted(unknown)[0])
    if request.query.get("format", "json") != "json":
        raise InvalidArgument(
            f"format [{request.query['format']}] is not served here; only [json] is", parameter="format"
        )


def int_param(request: web.Request, name: str, default: int, *, number_format: bool = False) -> int:
    """An integer parameter.  Under ``/_plugins`` it is read as Java's ``Integer.parseInt`` reads it,
    and a failure is worded as ``RestRequest.paramAsInt`` words it, or (``number_format``) left as
    the bare ``NumberFormatException`` that ml-commons 2.12+ lets through.  ``/v2`` takes ASCII digits only.
    """
    raw = request.query.get(name)
    if raw is None:
        return default
    if not _is_v2(request):
        try:
            return java_int(raw)
        except OpenSearchBadRequest:
            if number_format:
                raise
            raise _int_param_error(name, raw) from None
    value = int(raw) if INTEGER.fullmatch(raw) else None
    if value is None or not -(2**31) <= value < 2**31:
        raise _int_param_error(name, raw)
    return value


def _int_param_error(name: str, raw: str) -> InvalidArgument:
    """Made only on failure: every paged request reads two integer parameters."""
    return InvalidArgument(f"Failed to parse int parameter [{name}] with value [{raw}]", parameter=name)


def float_param(request: web.Request, name: str) -> float | None:
    raw = request.query.get(name)
    if raw is None:
        return None
    if not DECIMAL.fullmatch(raw):
        raise InvalidArgument(f"Failed to parse float parameter [{name}] with value [{raw}]", parameter=name)
    value = float(raw)
    if value != value or value in (float("inf"), float("-inf")):
        raise InvalidArgument(f"[{name}] must be a finite number, not [{raw}]", parameter=name)
    return value


#: Bodies larger than this are parsed off the event loop.
PARSE_IN_THREAD_BYTES = 256 * 1024


MEDIA_TYPE = re.compile(r"[a-z0-9!#$&^_.+-]+/[a-z0-9!#$&^_.+-]+")


class UnsupportedContentType(Exception):
    """A body OpenSearch would not read: its Content-Type is not JSON (a 406 under ``/_plugins``)."""


class _Rejected(ValueError):
    """Raised by the JSON parser's hook; its message goes to the caller as is."""


def _reject_constant(name: str) -> Any:
    raise _Rejected(f"{name} is not a JSON number; numbers must be finite")


#: Built once: ``json.loads`` with a hook builds a decoder on every call.
_DECODER = json.JSONDecoder(parse_constant=_reject_constant)


def parse_json(text: str | bytes, *, what: str = "request body", parameter: str | None = None) -> Any:
    """Strict JSON for everything a caller sends: the body, and the ``source`` parameter.

    Valid UTF-8, finite numbers of at most 4300 digits, no ``NaN`` or
    ``Infinity``, at most 64 levels of nesting, and no lone surrogate in any
    string or key (``"\\ud800"`` parses, but is not text, and would poison what
    is stored).  Anything else is a 400 naming the place.
    """
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ParseFailure(f"{what} is not valid UTF-8 (byte {exc.start})", parameter=parameter) from None
    try:
        if text.startswith("\ufeff"):  # as json.loads refuses it
            raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", text, 0)
        value = _DECODER.decode(text)
    except RecursionError:
        raise ParseFailure(f"{what} nests deeper than {MAX_JSON_DEPTH} levels", parameter=parameter) from None
    except json.JSONDecodeError as exc:
        raise ParseFailure(
            f"Failed to parse {what}: {exc.msg} at line {exc.lineno} column {exc.colno}", parameter=parameter
        ) from None
    except _Rejected as exc:
        raise ParseFailure(f"Failed to parse {what}: {exc}", parameter=parameter) from None
    except ValueError:  # int() refuses more digits than sys.get_int_max_str_digits()
        raise ParseFailure(
            f"Failed to parse {what}: a number has more than {MAX_INT_DIGITS} digits", parameter=parameter
        ) from None
    check_sound(value, what=what, parameter=parameter)
    return value


def check_sound(value: Any, *, what: str = "request body", parameter: str | None = None) -> None:
    """``parse_json``'s rules (depth, finite numbers, no lone surrogate) for a value another parser read."""
    if not _sound(value, what, parameter):
        _name_the_culprit(value, what, parameter)


def _sound(value: Any, what: str, parameter: str | None) -> bool:
    """The fast pass: depth (raised at once), then whether any string, key or number is bad."""
    if not _sound_scalar(value):
        return False
    stack: list[tuple[Any, int]] = [(value, 0)] if isinstance(value, (dict, list)) else []
    while stack:
        item, depth = stack.pop()
        if depth >= MAX_JSON_DEPTH:
            raise ParseFailure(f"{what} nests deeper than {MAX_JSON_DEPTH} levels", parameter=parameter)
        if isinstance(item, dict):
            if not all(key.isascii() for key in item) and any(has_lone_surrogate(key) for key in item):
                return False
            children = item.values()
        else:
            children = item
        for child in children:
            if isinstance(child, (dict, list)):
                stack.append((child, depth + 1))
            elif not _sound_scalar(child):
                return False
    return True


def _sound_scalar(value: Any) -> bool:
    if isinstance(value, str):
        return not has_lone_surrogate(value)
    if isinstance(value, float):
        return math.isfinite(value)
    return True


#: Where a value sits, as a chain of (parent, key or index) links.
_Path = tuple["_Path", str | int] | None


def _name_the_culprit(value: Any, what: str, parameter: str | None) -> None:
    """The slow pass, once something is known to be bad: find it, and say where."""
    stack: list[tuple[Any, _Path]] = [(value, None)]
    while stack:
        item, path = stack.pop()
        if isinstance(item, str) and has_lone_surrogate(item):
            _poisoned(what, parameter, path, key=False)
        if isinstance(item, float) and not math.isfinite(item):
            place = _spelt(path, parameter)
            raise ParseFailure(
                f"Failed to parse {what}: [{place or what}] is out of range; numbers must be finite",
                parameter=place or parameter,
            )
        if isinstance(item, dict):
            for key, child in item.items():
                if has_lone_surrogate(key):
                    _poisoned(what, parameter, (path, key), key=True)
                stack.append((child, (path, key)))
        elif isinstance(item, list):
            stack.extend((child, (path, index)) for index, child in enumerate(item))


def _spelt(path: _Path, parameter: str | None) -> str:
    steps: list[str | int] = []
    while path is not None:
        path, step = path
        steps.append(step)
    return json_path(reversed(steps), root=parameter or "")


def _poisoned(what: str, parameter: str | None, path: _Path, *, key: bool) -> None:
    place = _spelt(path, parameter)
    detail = f"{'the key ' if key else ''}[{place}]" if place else what
    raise InvalidArgument(
        f"{detail} holds a lone surrogate (half of a UTF-16 pair); text must be valid Unicode",
        parameter=place or parameter,
    )


def json_path(path: Iterable[str | int], root: str = "") -> str:
    """``records[0].metadata.x``: where a value sits in a JSON document."""
    text = root
    for step in path:
        text += f"[{step}]" if isinstance(step, int) else (f".{_printable(step)}" if text else _printable(step))
    return text


async def read_body(request: web.Request) -> bytes:
    """The raw body, within the size limit and the read timeout; under ``/_plugins``, JSON only."""
    try:
        if request.content.is_eof():  # the whole body came with the headers: nothing to wait for
            raw = await request.read()
        else:
            async with asyncio.timeout(request.config_dict[BODY_READ_TIMEOUT]):
                raw = await request.read()
    except web.HTTPRequestEntityTooLarge:
        raise PayloadTooLarge(f"request body is larger than {request.config_dict[MAX_BODY_BYTES]} bytes") from None
    except TimeoutError as timeout:
        # Fail the stream too: aiohttp then closes the connection right after the
        # 408, instead of lingering 10 s more for a body that is not coming.
        request.content.set_exception(timeout)
        raise RequestTimeout(
            f"the request body did not arrive within {request.config_dict[BODY_READ_TIMEOUT]:g} s"
        ) from None
    if raw and not _is_v2(request):
        check_content_type(request.headers.get("Content-Type"))
    return raw


def check_content_type(header: str | None) -> None:
    """OpenSearch reads a body only as a media type it knows: a malformed header is a 400, another type a 406."""
    if header is None:
        raise UnsupportedContentType("")
    media_type = header.split(";")[0].strip().lower()
    if not MEDIA_TYPE.fullmatch(media_type):
        raise OpenSearchBadRequest(
            f"java.lang.IllegalArgumentException: invalid Content-Type header [{header}]",
            exception="content_type_header_exception",
            caused_by={"type": "illegal_argument_exception", "reason": f"invalid Content-Type header [{header}]"},
        )
    if not JSON_MEDIA_TYPES.fullmatch(media_type):
        raise UnsupportedContentType(header)


async def read_json(request: web.Request, *, required: bool) -> Any:
    """The body as JSON, or None when it is empty and not required."""
    raw = await read_body(request)
    if not raw.strip():
        if required:
            raise ParseFailure("request body is required")
        return None
    if len(raw) > PARSE_IN_THREAD_BYTES:  # megabytes of JSON take a while: keep the loop free
        return await asyncio.to_thread(parse_json, raw)
    return parse_json(raw)


async def read_json_object(request: web.Request, *, required: bool) -> dict[str, Any] | None:
    value = await read_json(request, required=required)
    if value is not None and not isinstance(value, dict):
        raise ParseFailure(f"request body must be a JSON object, not {type(value).__name__}")
    return value


async def search_body(request: web.Request) -> dict[str, Any] | None:
    """A search body, or the ``source`` parameter that stands in for it (OpenSearch accepts both)."""
    body = await read_json(request, required=False)
    if body is None and "source" in request.query:
        body = parse_json(request.query["source"], what="[source] parameter", parameter="source")
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
