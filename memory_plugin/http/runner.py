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

import logging

from aiohttp import web
from aiohttp.http_exceptions import BadHttpMessage, LineTooLong
from aiohttp.web_protocol import RequestHandler
from aiohttp.web_request import BaseRequest

from memory_plugin.errors import InvalidArgument
from memory_plugin.http.apis import OPENSEARCH, TELNYX

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
            # Nothing is routed yet, so no sub-app can say: the request line's start is all there is.
            v2 = b"/v2/" in bytes(exc.args[0])[:16] if isinstance(exc.args[0], (bytes, bytearray)) else False
        else:
            reason = f"malformed HTTP request: {exc.message}".splitlines()[0]
            v2 = False
        log.info("malformed request refused", extra={"status": status, "reason": reason})
        api = TELNYX if v2 else OPENSEARCH
        response = api.error_response(InvalidArgument(reason))  # aiohttp's parse errors are all 400s
        response.force_close()
        return response


class _JsonErrorServer(web.Server):
    def __call__(self) -> RequestHandler:
        return _JsonErrorRequestHandler(self, loop=self._loop, **self._kwargs)


class JsonErrorRunner(web.AppRunner):
    """``web.AppRunner`` whose connections answer unparseable requests in the API's JSON."""

    async def _make_server(self) -> web.Server:
        server = await super()._make_server()
        server.__class__ = _JsonErrorServer
        return server
