"""The application factory: one function builds the server from settings.

Every resource opens and closes in ``cleanup_ctx``, so the same app works
stand-alone, under a test client, or mounted into another aiohttp app.
"""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import hmac
import logging
import socket
import sys
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AsyncExitStack, suppress
from typing import Any

import uvloop
from aiohttp import web
from aiohttp.typedefs import Middleware

from embedder import Embedder
from memory_plugin import console, logs
from memory_plugin._version import __version__
from memory_plugin.agentic import routes as agentic_routes
from memory_plugin.agentic.models import BASE as AGENTIC_BASE
from memory_plugin.agentic.routes import AGENTIC
from memory_plugin.auth import KeyBackend, KeyStore
from memory_plugin.auth_opensearch import open_key_store
from memory_plugin.erasure import routes as erasure_routes
from memory_plugin.erasure.routes import ERASURE
from memory_plugin.errors import Forbidden
from memory_plugin.histories import routes as history_routes
from memory_plugin.histories.bridge import HistoryBridge
from memory_plugin.histories.routes import HISTORIES
from memory_plugin.http.apis import API, OPENSEARCH, TELNYX, Api
from memory_plugin.http.body import BODY_READ_TIMEOUT, MAX_BODY_BYTES, continue_when_read
from memory_plugin.http.json import json_response
from memory_plugin.http.middleware import front_door, principal_of
from memory_plugin.http.runner import JsonErrorRunner
from memory_plugin.memory import routes_v211, routes_v212
from memory_plugin.memory.pages import RenderedPages
from memory_plugin.memory.routes_v211 import MEMORY, MESSAGE_PAGES
from memory_plugin.metrics import Metrics, Sampled
from memory_plugin.ml import model_group_routes
from memory_plugin.ml import routes as ml_routes
from memory_plugin.ml.routes import ML
from memory_plugin.openapi import openapi_document
from memory_plugin.services import open_services
from memory_plugin.settings import LUCENE_VERSIONS, Settings
from memory_plugin.sigv4 import SigV4Verifier

log = logging.getLogger("memory_plugin")

SETTINGS = web.AppKey("settings", Settings)
KEYS = web.AppKey("keys", KeyBackend)
METRICS = web.AppKey("metrics", Metrics)
BRIDGE = web.AppKey("bridge", HistoryBridge)
MODEL = web.AppKey("model", Mapping[str, Any])
PROCESS = web.AppKey("process", Mapping[str, Any])
#: Long-term memories waiting for their embedding, as the agentic store counts them.
AGENTIC_PENDING = web.AppKey("agentic_pending", Sampled)
AGENTIC_INFER_JOBS = web.AppKey("agentic_infer_jobs", Sampled)

OPENAPI = openapi_document()


def ensure_development_key(keys: KeyBackend, settings: Settings) -> str | None:
    """On first start, write a keys file with one development key and return its token.
    (Keys in OpenSearch are made with ``memory-plugin keys create`` only.)"""
    if not isinstance(keys, KeyStore) or keys.exists():
        return None
    entry, token = keys.create("dev-org", "dev-user")
    base = f"http://{settings.http.host}:{settings.http.port}"
    print(
        f"\nCreated {keys.path} with a development key for organization 'dev-org', user 'dev-user'.\n"
        f"It is shown only once:\n\n    {token}\n\n"
        f"Try:  curl -H 'Authorization: Bearer {token}' {base}/_plugins/_ml/memory/conversation\n",
        flush=True,
    )
    return token


async def root(request: web.Request) -> web.Response:
    settings = request.config_dict[SETTINGS]
    return json_response(
        {
            "name": settings.node.name,
            "cluster_name": settings.node.cluster_name,
            "cluster_uuid": "memory-plugin",
            "version": {
                "distribution": "opensearch",
                "number": settings.node.reported_version,
                "build_type": "memory-plugin",
                "build_hash": __version__,
                "build_date": "2026-11-30T00:00:00Z",
                "build_snapshot": False,
                "lucene_version": LUCENE_VERSIONS[settings.node.reported_version],
                "minimum_wire_compatibility_version": "7.10.0",
                "minimum_index_compatibility_version": "7.0.0",
            },
            "tagline": "The OpenSearch Project: https://opensearch.org/",
        }
    )


async def openapi(request: web.Request) -> web.Response:
    return json_response(OPENAPI)


async def health(request: web.Request) -> web.Response:
    """Liveness, which process answered (several may serve one port, or one cluster), the embedding
    model as it runs (precision, int8 kernels, CPU), and the backlog of background work as the stores
    count it, every process's (from memory: no store is asked on the request's path).

    ``backlog.outbox`` is how far search lags behind memory writes (also ``details.bridge``, as
    before), ``backlog.agentic_pending_embeddings`` the long-term memories not yet embedded and
    ``backlog.agentic_infer_jobs`` the inferring adds not yet applied (None until first counted)."""
    details: dict[str, Any] = {"model": request.config_dict[MODEL]}
    backlog: dict[str, Any] = {}
    bridge = request.config_dict.get(BRIDGE)
    if bridge is not None:
        details["bridge"] = backlog["outbox"] = dataclasses.asdict(bridge.lag)
    pending = request.config_dict.get(AGENTIC_PENDING)
    if pending is not None:
        backlog["agentic_pending_embeddings"] = pending.current()
    jobs = request.config_dict.get(AGENTIC_INFER_JOBS)
    if jobs is not None:
        backlog["agentic_infer_jobs"] = jobs.current()
    return json_response(
        {"status": "green", "process": request.config_dict[PROCESS], "backlog": backlog, "details": details}
    )


async def metrics(request: web.Request) -> web.Response:
    """Prometheus text, for the operator only: the ``[auth] metrics_token`` setting as a Bearer token.

    Metrics name every route's traffic: a tenant key gets 403, and without
    the setting nobody reads them.
    """
    token = request.config_dict[SETTINGS].auth.metrics_token
    authorization = request.headers.get("Authorization", "")
    scheme, _, credential = authorization.partition(" ")
    if token and scheme.lower() == "bearer" and credential.strip().isascii():
        if hmac.compare_digest(credential.strip().encode(), token.encode()):
            return await request.config_dict[METRICS].handler(request)
    await request.config_dict[KEYS].authenticate(authorization or None)  # 401 unless it is a valid tenant key
    if token:
        raise Forbidden("metrics need the operator's metrics token, not a tenant key")
    raise Forbidden("metrics are disabled: set metrics_token in [auth] (MEMORY_PLUGIN_AUTH_METRICS_TOKEN) to read them")


def _sigv4(settings: Settings) -> SigV4Verifier | None:
    """The SigV4 check, where the operator configured its keys (read now: a bad file fails the start)."""
    if settings.auth.sigv4_keys_file is None or settings.auth.sigv4_region is None:
        return None
    return SigV4Verifier(settings.auth.sigv4_keys_file, settings.auth.sigv4_region)


def create_app(settings: Settings, *, embedder: Embedder | None = None) -> web.Application:
    """The whole server.  Pass ``embedder`` to share one loaded model between apps."""
    keys = open_key_store(settings)
    registry = Metrics()
    app = web.Application(
        client_max_size=settings.http.max_body_bytes,
        middlewares=[
            front_door(
                keys,
                registry,
                public=[health, metrics, *console.PUBLIC],
                sigv4=_sigv4(settings),
                send_timeout=settings.http.idle_timeout,
            )
        ],
    )
    app[METRICS] = registry
    app[SETTINGS] = settings
    app[KEYS] = keys
    app[PROCESS] = registry.identify(settings.node.name)
    app[MAX_BODY_BYTES] = settings.http.max_body_bytes
    app[BODY_READ_TIMEOUT] = settings.http.body_read_timeout
    app[MESSAGE_PAGES] = RenderedPages(settings.http.page_cache_mb * 1024 * 1024)

    async def services_context(app: web.Application) -> AsyncIterator[None]:
        ensure_development_key(keys, settings)
        async with AsyncExitStack() as stack:
            services = await stack.enter_async_context(open_services(settings, embedder=embedder, metrics=registry))
            stack.push_async_callback(keys.close)
            await keys.open()
            app[MEMORY] = services.memory
            app[HISTORIES] = services.histories
            app[ERASURE] = services.erasure
            app[AGENTIC] = services.agentic
            app[ML] = services.ml
            app[MODEL] = services.model
            if services.bridge is not None:
                app[BRIDGE] = services.bridge
            pending = app[AGENTIC_PENDING] = Sampled(services.agentic.store.pending_count)
            stack.push_async_callback(pending.close)
            await pending.refresh()
            registry.agentic_pending.set_function(lambda: pending.current() or 0)
            jobs = app[AGENTIC_INFER_JOBS] = Sampled(services.agentic.store.infer_job_count)
            stack.push_async_callback(jobs.close)
            await jobs.refresh()
            registry.agentic_infer_jobs.set_function(lambda: jobs.current() or 0)
            yield

    app.cleanup_ctx.append(services_context)
    app.router.add_get("/", root)
    app.router.add_get("/_health", health)
    app.router.add_get("/_metrics", metrics)
    app.router.add_get("/_openapi.json", openapi)
    # Each API is a sub-app that carries its error format; the console's errors read as the root's.
    app.add_subapp(console.PATH, _with_api(console.app(principal_of), OPENSEARCH))
    plugins = _api_app(
        OPENSEARCH, "/_plugins", routes_v211.routes, routes_v212.routes, ml_routes.routes, model_group_routes.routes
    )
    # Agentic memory is a sub-app of its own: its middleware answers 403 while it is disabled.
    agentic = _api_app(OPENSEARCH, AGENTIC_BASE, agentic_routes.routes, middlewares=[agentic_routes.enabled_only])
    plugins.add_subapp(AGENTIC_BASE.removeprefix("/_plugins"), agentic)
    app.add_subapp("/_plugins", plugins)
    app.add_subapp("/v2", _api_app(TELNYX, "/v2", history_routes.routes, erasure_routes.routes))
    return app


def _api_app(
    api: Api, prefix: str, *tables: web.RouteTableDef, middlewares: Sequence[Middleware] = ()
) -> web.Application:
    """One API's routes as a sub-app mounted at ``prefix``: the sub-app, not the path's text,
    tells the front door which error format and parameter rules apply.  Route modules keep
    their full paths, as the API's documentation writes them."""
    sub = _with_api(web.Application(middlewares=middlewares), api)
    for table in tables:
        for route in table:
            assert isinstance(route, web.RouteDef) and route.path.startswith(prefix + "/"), route
            path = route.path.removeprefix(prefix)
            kwargs = {"expect_handler": continue_when_read, **route.kwargs}
            sub.router.add_route(route.method, path, route.handler, **kwargs)
            if api is OPENSEARCH:  # OpenSearch's router ignores a trailing slash; clients send one (opensearch-py-ml)
                sub.router.add_route(route.method, path + "/", route.handler, **kwargs)
    return sub


def _with_api(sub: web.Application, api: Api) -> web.Application:
    sub[API] = api
    return sub


#: Seconds a thread running Python (DSL evaluation, SQLite rows) may keep the GIL
#: while the event loop waits for it: 1 ms instead of CPython's 5 keeps health
#: checks and small requests fast while heavy searches run in their threads.
GIL_SWITCH_INTERVAL = 0.001


async def _serve(settings: Settings, sock: socket.socket | None, ready: Callable[[], object] | None) -> None:
    """``web.run_app``, with ``JsonErrorRunner``: serve until SIGINT or SIGTERM, then finish in-flight requests."""
    runner = JsonErrorRunner(
        create_app(settings),
        handle_signals=True,
        access_log=None,  # the request-id middleware logs each request, structured
        keepalive_timeout=settings.http.idle_timeout,
        shutdown_timeout=30.0,
    )
    await runner.setup()
    # Everything loaded so far (modules, the model, the stores) lives as long as the
    # server: keep it out of the collector's full passes, which otherwise stop every
    # thread, the event loop included, for tens of milliseconds under search load.
    gc.collect()
    gc.freeze()
    try:
        if sock is None:
            await web.TCPSite(runner, settings.http.host, settings.http.port).start()
        else:  # a worker of ``serve --workers N``: the socket its parent opened
            await web.SockSite(runner, sock).start()
        print(f"======== Running on http://{settings.http.host}:{settings.http.port} ========", flush=True)
        if ready is not None:
            ready()
        while True:
            await asyncio.sleep(3600)
    finally:
        await runner.cleanup()


def serving_loop() -> asyncio.AbstractEventLoop:
    """A new event loop as the stand-alone server runs on, the process's GIL switch interval set: the
    benchmarks measure searches on it (``asyncio.Runner(loop_factory=serving_loop)``), not on asyncio's
    own loop, whose wake-up after a search thread costs about 0.05 ms more."""
    sys.setswitchinterval(GIL_SWITCH_INTERVAL)
    return uvloop.new_event_loop()


def run(settings: Settings, sock: socket.socket | None = None, ready: Callable[[], object] | None = None) -> None:
    """Serve until SIGINT or SIGTERM, as ``web.run_app`` does: only the serving task is
    cancelled at first, so that the runner's cleanup lets in-flight requests finish.

    ``sock`` and ``ready`` are for a worker of ``serve --workers N`` (``workers.py``): the socket its
    parent opened, and what to call once it serves.

    The stand-alone server runs on uvloop: its sockets, callbacks and timers cost about a
    third less CPU per request than asyncio's own loop (``scripts/bench_memory.py``).  A
    mounted app runs on whatever loop its host chose.
    """
    logs.configure(settings.log_level.upper())
    loop = serving_loop()
    asyncio.set_event_loop(loop)
    serving = loop.create_task(_serve(settings, sock, ready))
    try:
        loop.run_until_complete(serving)
    except (web.GracefulExit, KeyboardInterrupt):
        pass
    finally:
        serving.cancel()
        with suppress(asyncio.CancelledError):
            loop.run_until_complete(serving)
        leftovers = asyncio.all_tasks(loop)
        for task in leftovers:
            task.cancel()
        loop.run_until_complete(asyncio.gather(*leftovers, return_exceptions=True))
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()
