"""The application factory: one function builds the server from settings.

Every resource opens and closes in ``cleanup_ctx``, so the same app works
stand-alone, under a test client, or mounted into another aiohttp app.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from typing import Any

from aiohttp import web

from embedder import AsyncEmbedder, Embedder, ensure_default_model
from memory_plugin import __version__, logs
from memory_plugin.histories import routes as history_routes
from memory_plugin.histories.bridge import HistoryBridge
from memory_plugin.histories.routes import HISTORIES
from memory_plugin.histories.service import HistoryService
from memory_plugin.auth import KeyStore
from memory_plugin.memory import routes_v211, routes_v212
from memory_plugin.memory.routes_v211 import MEMORY
from memory_plugin.memory.service import MemoryService
from memory_plugin.memory.store import SqliteMemoryStore
from memory_plugin.metrics import Metrics
from memory_plugin.settings import Settings
from memory_plugin.stores.factory import region_store
from memory_plugin.web import MAX_BODY_BYTES, auth_middleware, error_middleware, json_response, request_id_middleware

log = logging.getLogger("memory_plugin")

SETTINGS = web.AppKey("settings", Settings)
KEYS = web.AppKey("keys", KeyStore)
METRICS = web.AppKey("metrics", Metrics)

#: What ``GET /`` reports as the OpenSearch version: the API level we serve.
COMPATIBLE_OPENSEARCH = "2.19.1"


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
        file=sys.stderr if settings.port == 0 else sys.stdout,
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


async def health(request: web.Request) -> web.Response:
    return json_response({"status": "green"})


def load_embedder(settings: Settings) -> Embedder:
    """The configured model folder, or the default one (built on first use)."""
    model_dir = settings.model_dir or ensure_default_model()
    return Embedder.from_dir(model_dir, intra_threads=settings.embed_threads, precision=settings.embed_precision)


def create_app(settings: Settings, *, embedder: Embedder | None = None) -> web.Application:
    """The whole server.  Pass ``embedder`` to share one loaded model between apps."""
    keys = KeyStore(settings.resolved_keys_file)
    metrics = Metrics()
    app = web.Application(
        client_max_size=settings.max_body_bytes,
        middlewares=[request_id_middleware, metrics.middleware(), error_middleware, auth_middleware(keys)],
    )
    app[METRICS] = metrics
    app[SETTINGS] = settings
    app[KEYS] = keys
    app[MAX_BODY_BYTES] = settings.max_body_bytes

    async def histories_context(app: web.Application) -> AsyncIterator[None]:
        loop = asyncio.get_running_loop()
        model = embedder or await loop.run_in_executor(None, load_embedder, settings)
        batcher = AsyncEmbedder(
            model,
            max_batch=settings.embed_batch_size,
            max_wait_ms=settings.embed_max_wait_ms,
            cache_size=settings.query_cache_size,
            on_batch=metrics.observe_batch,
        )
        stores = {name: region_store(settings, name) for name in settings.regions}
        async with AsyncExitStack() as stack:
            stack.push_async_callback(batcher.close)
            for store in stores.values():
                await store.open(model.dimension)
                stack.push_async_callback(store.close)
            app[HISTORIES] = HistoryService(
                stores, batcher, settings.home_region, settings.search_deadline, metrics.observe_region
            )
            yield

    async def memory_context(app: web.Application) -> AsyncIterator[None]:
        ensure_development_key(keys, settings)
        keys.load()
        store = SqliteMemoryStore(settings.data_dir / "memory.sqlite3")
        await store.open()
        bridge = HistoryBridge(app[HISTORIES]) if settings.bridge else None
        app[MEMORY] = MemoryService(store, bridge)
        try:
            yield
        finally:
            await store.close()

    app.cleanup_ctx.append(histories_context)
    app.cleanup_ctx.append(memory_context)
    app.router.add_get("/", root)
    app.router.add_get("/_health", health)
    app.router.add_get("/_metrics", metrics.handler)
    app.router.add_routes(routes_v211.routes)
    app.router.add_routes(routes_v212.routes)
    app.router.add_routes(history_routes.routes)
    return app


def run(settings: Settings, **kwargs: Any) -> None:
    logs.configure()
    web.run_app(
        create_app(settings),
        host=settings.host,
        port=settings.port,
        access_log=None,  # the request-id middleware logs each request, structured
        shutdown_timeout=30.0,
        **kwargs,
    )
