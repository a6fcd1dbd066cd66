"""The application factory: one function builds the server from settings.

Every resource opens and closes in ``cleanup_ctx``, so the same app works
stand-alone, under a test client, or mounted into another aiohttp app.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import AsyncIterator
from typing import Any

from aiohttp import web

from embedder import Embedder
from memory_plugin import logs
from memory_plugin._version import __version__
from memory_plugin.auth import KeyStore
from memory_plugin.histories import routes as history_routes
from memory_plugin.histories.routes import HISTORIES
from memory_plugin.memory import routes_v211, routes_v212
from memory_plugin.memory.routes_v211 import MEMORY
from memory_plugin.metrics import Metrics
from memory_plugin.openapi import openapi_document
from memory_plugin.services import open_services
from memory_plugin.settings import Settings
from memory_plugin.web import MAX_BODY_BYTES, auth_middleware, error_middleware, json_response, request_id_middleware

log = logging.getLogger("memory_plugin")

SETTINGS = web.AppKey("settings", Settings)
KEYS = web.AppKey("keys", KeyStore)
METRICS = web.AppKey("metrics", Metrics)

#: What ``GET /`` reports as the OpenSearch version: the API level we serve.
COMPATIBLE_OPENSEARCH = "2.19.1"
OPENAPI = openapi_document()


def ensure_development_key(keys: KeyStore, settings: Settings) -> str | None:
    """On first start, write a keys file with one development key and return its token."""
    if keys.exists():
        return None
    entry, token = keys.create("dev-org", "dev-user")
    base = f"http://{settings.host}:{settings.port}"
    print(
        f"\nCreated {keys.path} with a development key for organization 'dev-org', user 'dev-user'.\n"
        f"It is shown only once:\n\n    {token}\n\n"
        f"Try:  curl -H 'Authorization: Bearer {token}' {base}/_plugins/_ml/memory/conversation\n",
        flush=True,
    )
    return token


async def root(request: web.Request) -> web.Response:
    settings = request.app[SETTINGS]
    return json_response(
        {
            "name": settings.node_name,
            "cluster_name": settings.cluster_name,
            "cluster_uuid": "memory-plugin",
            "version": {
                "distribution": "opensearch",
                "number": COMPATIBLE_OPENSEARCH,
                "build_type": "memory-plugin",
                "build_hash": __version__,
                "build_date": "2026-11-30T00:00:00Z",
                "build_snapshot": False,
                "lucene_version": "9.12.1",
                "minimum_wire_compatibility_version": "7.10.0",
                "minimum_index_compatibility_version": "7.0.0",
            },
            "tagline": "The OpenSearch Project: https://opensearch.org/",
        }
    )


async def openapi(request: web.Request) -> web.Response:
    return json_response(OPENAPI)


async def health(request: web.Request) -> web.Response:
    return json_response({"status": "green"})


def create_app(settings: Settings, *, embedder: Embedder | None = None) -> web.Application:
    """The whole server.  Pass ``embedder`` to share one loaded model between apps."""
    keys = KeyStore(settings.resolved_keys_file)
    metrics = Metrics()
    app = web.Application(
        client_max_size=settings.max_body_bytes,
        middlewares=[
            request_id_middleware,
            metrics.middleware(),
            error_middleware,
            auth_middleware(keys, public=[health]),
        ],
    )
    app[METRICS] = metrics
    app[SETTINGS] = settings
    app[KEYS] = keys
    app[MAX_BODY_BYTES] = settings.max_body_bytes

    async def services_context(app: web.Application) -> AsyncIterator[None]:
        ensure_development_key(keys, settings)
        keys.load()
        async with open_services(settings, embedder=embedder, metrics=metrics) as services:
            app[MEMORY] = services.memory
            app[HISTORIES] = services.histories
            yield

    app.cleanup_ctx.append(services_context)
    app.router.add_get("/", root)
    app.router.add_get("/_health", health)
    app.router.add_get("/_metrics", metrics.handler)
    app.router.add_get("/_openapi.json", openapi)
    app.router.add_routes(routes_v211.routes)
    app.router.add_routes(routes_v212.routes)
    app.router.add_routes(history_routes.routes)
    return app


#: Seconds a thread running Python (DSL evaluation, SQLite rows) may keep the GIL
#: while the event loop waits for it: 1 ms instead of CPython's 5 keeps health
#: checks and small requests fast while heavy searches run in their threads.
GIL_SWITCH_INTERVAL = 0.001


def run(settings: Settings, **kwargs: Any) -> None:
    logs.configure(settings.log_level.upper())
    sys.setswitchinterval(GIL_SWITCH_INTERVAL)
    web.run_app(
        create_app(settings),
        host=settings.host,
        port=settings.port,
        access_log=None,  # the request-id middleware logs each request, structured
        shutdown_timeout=30.0,
        **kwargs,
    )
