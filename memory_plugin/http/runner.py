"""The stand-alone server's runner: requests aiohttp refuses before routing get the API's JSON error.

aiohttp has no public hook for the answer to a request it cannot parse
(``RequestHandler.handle_error`` writes plain text), so this module uses three
private ones: ``AppRunner._make_server``, the ``Server``'s ``_loop`` and
``_kwargs`` with which it builds each connection's ``RequestHandler``, and
``RequestHandler.handle_error``.  ``tests/unit/test_aiohttp_hooks.py`` fails,
naming the hook, when an aiohttp upgrade changes one of them.  A mounted app
runs under its host's runner and keeps aiohttp's plain-text answer.
"""

from __future__ import annotations

import ast
import logging
import re

from aiohttp import web
from aiohttp.http_exceptions import BadHttpMessage, LineTooLong
from aiohttp.web_protocol import RequestHandler
from aiohttp.web_request import BaseRequest

from memory_plugin.errors import InvalidArgument
from memory_plugin.http.apis import OPENSEARCH, TELNYX
from memory_plugin.http.middleware import fresh_request_id

log = logging.getLogger("memory_plugin")


class _JsonErrorRequestHandler(RequestHandler):
    """Requests aiohttp refuses before routing (a URL over 8190 bytes, a malformed header)
    get the API's JSON error, and one log line instead of a traceback each."""

    __slots__ = ()

    def handle_error(
        self, request: BaseRequest, status: int = 500, exc: BaseException | None = None, message: str | None = None
    ) -> web.StreamResponse:
        if not isinstance(exc, BadHttpMessage) or status >= 500:
            return super().handle_error(request, status, exc, message)
        if isinstance(exc, LineTooLong):
            reason = f"the request line or a header is longer than {exc.args[1]} bytes"
        else:
            reason = f"malformed HTTP request: {exc.message}".splitlines()[0]
        request_id = fresh_request_id()
        log.info("malformed request refused", extra={"status": status, "reason": reason, "request_id": request_id})
        api = TELNYX if _names_v2(exc) else OPENSEARCH
        response = api.error_response(InvalidArgument(reason))  # aiohttp's parse errors are all 400s
        response.headers["X-Request-Id"] = request_id
        response.force_close()
        return response


#: The start of a request line, or of a URL (a ``LineTooLong`` shows the URL), under ``/v2/``.
_V2_REQUEST_LINE = re.compile(rb"(?:[A-Z]+ )?/v2/")
#: The bytes an error of aiohttp's parser shows (``Invalid char in url query:\n\n  b'GET /v2/…'\n  ^``).
_SHOWN_BYTES = re.compile(r"^\s*(b'.*'|b\".*\")$", re.MULTILINE)


def _names_v2(exc: BadHttpMessage) -> bool:
    """Whether the request line the parser refused, where its error shows it, is under ``/v2/``.

    Nothing is routed yet, so no sub-app can say: the request line's start is all there
    is, and only an error in the request line itself shows it (not one in a header or a chunk).
    """
    if isinstance(exc, LineTooLong):
        shown = exc.args[0]
    else:
        match = _SHOWN_BYTES.search(exc.message)
        try:
            shown = ast.literal_eval(match.group(1)) if match else b""
        except (ValueError, SyntaxError):
            shown = b""
    return isinstance(shown, (bytes, bytearray)) and _V2_REQUEST_LINE.match(bytes(shown[:16])) is not None


class _JsonErrorServer(web.Server):
    def __call__(self) -> RequestHandler:
        return _JsonErrorRequestHandler(self, loop=self._loop, **self._kwargs)


class JsonErrorRunner(web.AppRunner):
    """``web.AppRunner`` whose connections answer unparseable requests in the API's JSON."""

    async def _make_server(self) -> web.Server:
        server = await super()._make_server()
        server.__class__ = _JsonErrorServer
        return server
