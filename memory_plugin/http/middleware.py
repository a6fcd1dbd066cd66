"""The middleware around every request: a request id, metrics and a log line, the key check,
and every error rendered in the API's own format (``apis.Api``, chosen by the sub-app)."""

from __future__ import annotations

import asyncio
import json
import logging
import random
import re
import time
from collections.abc import Awaitable, Callable, Iterable

from aiohttp import web
from aiohttp.typedefs import Middleware

from memory_plugin.auth import KeyBackend, Principal
from memory_plugin.errors import NotFound, PayloadTooLarge, ServiceError
from memory_plugin.http.apis import TELNYX, Api, api_of
from memory_plugin.http.body import MAX_BODY_BYTES, UnsupportedContentType, read_body
from memory_plugin.http.json import encode_json
from memory_plugin.http.params import check_text
from memory_plugin.metrics import Metrics
from memory_plugin.opensearch_client import unreachable
from memory_plugin.opensearch_rest import filter_path
from memory_plugin.sigv4 import SCHEME as SIGV4_SCHEME
from memory_plugin.sigv4 import SignedRequest, SigV4Verifier

log = logging.getLogger("memory_plugin.http")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

PRINCIPAL = web.RequestKey("principal", Principal)
REQUEST_ID = web.RequestKey("request_id", str)
#: What a request id may be: printable ASCII, so that it is safe in headers and logs.
REQUEST_ID_PATTERN = re.compile(r"[!-~]{1,128}")


def fresh_request_id() -> str:
    """A label for logs, not a secret: no system call for it."""
    return f"{random.getrandbits(128):032x}"


def principal_of(request: web.Request) -> Principal:
    return request[PRINCIPAL]


def front_door(
    keys: KeyBackend,
    metrics: Metrics,
    public: Iterable[Handler] = (),
    sigv4: SigV4Verifier | None = None,
    send_timeout: float | None = None,
) -> Middleware:
    """Everything every request needs around its handler, in one middleware: one frame per request, not six.

    Outermost first: a request id (``X-Request-Id``, on errors too), the request's
    metrics and log line, then errors in the API's own format around the key
    check (every route but the ``public`` handlers needs one; an AWS SigV4 signature
    where ``sigv4`` is configured), strict text in the URL, the handler, and ``filter_path``.
    The answer is sent here, within ``send_timeout`` (``_send``).
    """
    public = frozenset(public)

    @web.middleware
    async def serve(request: web.Request, handler: Handler) -> web.StreamResponse:
        request_id = request.headers.get("X-Request-Id", "")
        if not REQUEST_ID_PATTERN.fullmatch(request_id):
            request_id = fresh_request_id()
        request[REQUEST_ID] = request_id
        started = time.perf_counter()
        status = 500
        try:
            response = await _answer(request, handler, keys, public, sigv4)
            status = response.status
        except web.HTTPException as exc:
            status = exc.status
            exc.headers["X-Request-Id"] = request_id
            raise
        finally:
            metrics.observe_request(request, status, time.perf_counter() - started)
        response.headers["X-Request-Id"] = request_id
        if request.body_exists and not request.content.is_eof():
            # a body left unread (refused before reading: no key, too large, too slow) is not drained: aiohttp
            # would read and drop up to 10 s of it, for a caller with no key too.  A failed stream ends that.
            response.force_close()
            request.content.set_exception(TimeoutError())
        if send_timeout is not None and not await _send(request, response, send_timeout):
            status = 499
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


#: Answers smaller than this go to the socket's buffer without waiting (asyncio's write high-water mark), so
#: they are left to aiohttp to send: no task or timer for them.
_SMALL_ANSWER = 64 * 1024


async def _send(request: web.Request, response: web.StreamResponse, timeout: float) -> bool:
    """Send the answer, or close the connection once the client has read none of it for ``timeout`` seconds:
    a client that stopped reading held its answer in memory for as long as it kept the socket open (200 such
    clients of 8 MB answers: 1.5 GB, past the idle timeout).  False when the connection was closed; aiohttp
    then finds the answer sent."""
    if response.prepared or (response.content_length or _SMALL_ANSWER) < _SMALL_ANSWER:
        return True  # a stream its handler sent itself, or an answer the socket's buffer takes at once
    transport = request.transport
    sending = asyncio.ensure_future(_prepare_and_finish(request, response))
    loop = asyncio.get_running_loop()
    unsent, moved = -1, loop.time()
    while True:
        done, _ = await asyncio.wait({sending}, timeout=timeout / 4)
        if done:
            error = sending.exception()
            if error is not None and not isinstance(error, ConnectionError):  # gone: aiohttp finds it so too
                raise error
            return error is None
        now_unsent = transport.get_write_buffer_size() if transport is not None else 0
        if now_unsent != unsent:
            unsent, moved = now_unsent, loop.time()
        elif loop.time() - moved >= timeout:
            break
    log.warning("closed a connection that read no more of its answer in %g s", timeout)
    sending.cancel()
    if transport is not None:
        transport.abort()
    return False


async def _prepare_and_finish(request: web.Request, response: web.StreamResponse) -> None:
    await response.prepare(request)
    await response.write_eof()


async def _authenticate(request: web.Request, keys: KeyBackend, sigv4: SigV4Verifier | None) -> Principal:
    """The caller: an API key (Bearer or Basic), or an AWS SigV4 signature (ml-commons' remote agentic memory),
    which covers the body: it is read first (and kept for the handler)."""
    authorization = request.headers.get("Authorization")
    if sigv4 is not None and authorization and authorization.startswith(SIGV4_SCHEME):
        headers = {name.lower(): ",".join(request.headers.getall(name)) for name in request.headers}
        return await sigv4.verify(SignedRequest(request.method, request.raw_path, headers, lambda: read_body(request)))
    return await keys.authenticate(authorization)


async def _answer(
    request: web.Request, handler: Handler, keys: KeyBackend, public: frozenset[Handler], sigv4: SigV4Verifier | None
) -> web.StreamResponse:
    """The handler's answer, or the error it raised as the API words it."""
    api = api_of(request)
    try:
        if request.match_info.handler not in public:
            request[PRINCIPAL] = await _authenticate(request, keys, sigv4)
        check_text(request)
        return _filter_path(request, api, await handler(request))
    except ServiceError as error:
        return api.error_response(error)
    except web.HTTPRequestEntityTooLarge:
        return api.error_response(
            PayloadTooLarge(f"request body is larger than {request.config_dict[MAX_BODY_BYTES]} bytes")
        )
    except UnsupportedContentType as exc:
        return api.unsupported_content_type(f"Content-Type header [{exc}] is not supported")
    except web.HTTPMethodNotAllowed as exc:
        allowed = ", ".join(sorted(exc.allowed_methods - {"HEAD"}))
        reason = (
            f"Incorrect HTTP method for uri [{request.raw_path}] and method [{request.method}], allowed: [{allowed}]"
        )
        return api.method_not_allowed(reason)
    except web.HTTPNotFound as exc:
        if request.match_info.http_exception is None:  # a route matched and answered 404 itself
            return api.error_response(NotFound("resource", request.path, reason=exc.text or "not found"))
        return api.no_handler(
            request.path, f"no handler found for uri [{request.raw_path}] and method [{request.method}]"
        )
    except web.HTTPException:
        raise
    except Exception as exc:
        if (typed := unreachable(exc)) is not None:
            log.warning("OpenSearch did not answer: %r", exc, extra={"request_id": request.get(REQUEST_ID)})
            return api.error_response(typed)
        return _internal_error(request, api, exc)  # a bug: log it, and still answer in the API's format


def _filter_path(request: web.Request, api: Api, response: web.StreamResponse) -> web.StreamResponse:
    """``filter_path`` trims successful JSON answers under ``/_plugins``, as OpenSearch does (errors stay whole)."""
    expression = request.query.get("filter_path")
    if (
        expression is None
        or api is TELNYX
        or not isinstance(response, web.Response)
        or response.status >= 300
        or response.content_type != "application/json"
        or response.body is None
    ):
        return response
    assert isinstance(response.body, bytes)
    trimmed = filter_path(json.loads(response.body), expression)
    return web.Response(body=encode_json(trimmed), status=response.status, content_type="application/json")


def _internal_error(request: web.Request, api: Api, exc: BaseException) -> web.Response:
    log.error("unhandled error", exc_info=exc, extra={"request_id": request.get(REQUEST_ID)})
    return api.error_response(ServiceError("internal error; the request id is in the X-Request-Id header"))
