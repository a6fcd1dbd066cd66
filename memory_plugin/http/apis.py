"""The APIs the server speaks, each answering errors in its own format.

Each API's sub-app carries its ``Api`` under ``API``; the innermost sub-app
that names one decides, so an id or a mount prefix that reads ``v2`` never
changes the format (issue 22).  Paths outside every API (``/``, ``/_health``,
unknown paths) answer as OpenSearch does, as the node the server stands in for.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from memory_plugin.errors import (
    InvalidArgument,
    NotFound,
    ParseFailure,
    ServiceError,
    Unauthorized,
)
from memory_plugin.http.json import json_response


class Api:
    """OpenSearch's API (``/_plugins``): errors as OpenSearch words them, routing errors as its REST layer does."""

    def error_body(self, error: ServiceError) -> dict[str, Any]:
        return error.opensearch_body()

    def error_response(self, error: ServiceError) -> web.Response:
        response = json_response(self.error_body(error), status=error.status)
        if isinstance(error, Unauthorized):
            response.headers["WWW-Authenticate"] = 'Bearer realm="memory-plugin", Basic realm="memory-plugin"'
        return response

    def unsupported_content_type(self, reason: str) -> web.Response:
        return json_response({"error": reason, "status": 406}, status=406)

    def method_not_allowed(self, reason: str) -> web.Response:
        return json_response({"error": reason, "status": 405}, status=405)

    def no_handler(self, path: str, reason: str) -> web.Response:
        return json_response({"error": reason}, status=400)


class TelnyxApi(Api):
    """The Telnyx-style ``/v2`` API: every error, routing ones too, in its ``errors`` list."""

    def error_body(self, error: ServiceError) -> dict[str, Any]:
        return error.telnyx_body()

    def unsupported_content_type(self, reason: str) -> web.Response:
        return self.error_response(ParseFailure(reason))

    def method_not_allowed(self, reason: str) -> web.Response:
        response = self.error_response(InvalidArgument(reason))
        response.set_status(405)
        return response

    def no_handler(self, path: str, reason: str) -> web.Response:
        return self.error_response(NotFound("handler", path, reason=reason))


OPENSEARCH = Api()
TELNYX = TelnyxApi()

API = web.AppKey("api", Api)


def api_of(request: web.Request) -> Api:
    """The API of the innermost sub-app that names one; OpenSearch's outside them all."""
    for app in reversed(request.match_info.apps):
        api = app.get(API)
        if api is not None:
            return api
    return OPENSEARCH
