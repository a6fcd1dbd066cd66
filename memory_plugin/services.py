"""Open and close everything the services need, in one place.

The HTTP app and the in-process public API both use ``open_services``, so
they run the very same code over the very same stores.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from embedder import AsyncEmbedder, Embedder, ensure_default_model
from memory_plugin.agentic.service import AgenticService
from memory_plugin.agentic.setup import open_agentic
from memory_plugin.concurrency import run_all
from memory_plugin.erasure.service import ErasureService
from memory_plugin.files import lock_exclusively
from memory_plugin.histories.bridge import BridgeMetrics, HistoryBridge
from memory_plugin.histories.service import HistoryService
from memory_plugin.histories.stores import open_histories_store
from memory_plugin.memory.service import MemoryService
from memory_plugin.memory.stores import open_memory_store
from memory_plugin.metrics import Metrics
from memory_plugin.ml.service import MLService
from memory_plugin.ml.setup import open_ml
from memory_plugin.settings import EmbeddedRegion, OpenSearchRegion, Settings

log = logging.getLogger("memory_plugin")


@dataclass(frozen=True)
class Services:
    memory: MemoryService
    histories: HistoryService
    agentic: AgenticService
    ml: MLService
    #: Deleting histories by filter, and erasing a user from every API.
    erasure: ErasureService
    #: The memory→histories indexer; None with the ``bridge`` setting off.
    bridge: HistoryBridge | None = None
    #: What embeds (``Embedder.describe``): model, precision, int8 kernels, CPU.
    model: Mapping[str, Any] = field(default_factory=dict)


def load_embedder(settings: Settings) -> Embedder:
    """The configured model folder, or the default one (built on first use)."""
    model_dir = settings.embedder.model_dir or ensure_default_model()
    model = Embedder.from_dir(model_dir, intra_threads=settings.embedder.threads, precision=settings.embedder.precision)
    log.info("embedding model loaded", extra={"model_dir": str(model_dir), "model": model.describe()})
    return model


#: In each folder of embedded data, held while the services are open (``files.lock_exclusively``).
LOCK_FILE = "memory-plugin.lock"


def embedded_folders(settings: Settings) -> list[Path]:
    """The folders only one process may serve: the data folder when memory (the home region) or a
    region is embedded in it, and each embedded region kept outside it.  With every store on
    OpenSearch there is none, and any number of processes may serve."""
    data_dir = settings.data_dir.resolve()
    home = settings.regions.get(settings.home_region)
    folders = set() if isinstance(home, OpenSearchRegion) else {data_dir}
    for name, region in settings.regions.items():
        if isinstance(region, EmbeddedRegion):
            path = settings.region_path(name).resolve()
            folders.add(data_dir if path.is_relative_to(data_dir) else path)
    return sorted(folders)


@asynccontextmanager
async def open_services(
    settings: Settings, *, embedder: Embedder | None = None, metrics: Metrics | None = None
) -> AsyncIterator[Services]:
    """Lock the embedded data folders, open the embedder, the region stores and the memory store;
    close them all on exit.  The locks come first: a second server on the same folder is refused
    before it spends seconds loading a model."""
    async with AsyncExitStack() as stack:
        for folder in embedded_folders(settings):
            stack.callback(os.close, lock_exclusively(folder / LOCK_FILE))
        model = (
            embedder
            if embedder is not None
            else await asyncio.get_running_loop().run_in_executor(None, load_embedder, settings)
        )
        batcher = AsyncEmbedder(
            model,
            max_batch=settings.embedder.batch_size,
            max_wait_ms=settings.embedder.max_wait_ms,
            cache_size=settings.embedder.query_cache_size,
            on_batch=metrics.observe_batch if metrics else None,
        )
        stack.push_async_callback(batcher.close)
        if metrics is not None:
            metrics.watch(settings.regions, lambda: batcher.pending)
        stores = {name: open_histories_store(settings, name) for name in settings.regions}
        memory_store = open_memory_store(settings)
        described = model.describe() if isinstance(model, Embedder) else {"name": type(model).__name__}

        async def opened(opening: Awaitable[None], close: Callable[[], Awaitable[None]]) -> None:
            await opening
            stack.push_async_callback(close)

        # Side by side: on OpenSearch each store creates its indices, and ten made one after the other took a second.
        *_, ml = await run_all(
            *(opened(store.open(model.dimension), store.close) for store in stores.values()),
            opened(memory_store.open(), memory_store.close),
            stack.enter_async_context(open_ml(settings, batcher, described, metrics)),
        )
        assert isinstance(ml, MLService)
        histories = HistoryService(
            stores,
            batcher,
            settings.home_region,
            settings.search_deadline,
            metrics.observe_region if metrics else None,
            stores[settings.home_region].record_claims(),
        )
        bridge = None
        if settings.bridge.enabled:
            bridge = HistoryBridge(
                histories,
                memory_store,
                batch_size=settings.bridge.batch_size,
                retry_max_seconds=settings.bridge.retry_max_seconds,
                metrics=BridgeMetrics(metrics.registry if metrics else None),
            )
            await bridge.start()
            stack.push_async_callback(bridge.stop)
        memory = MemoryService(memory_store, bridge)
        agentic = await stack.enter_async_context(open_agentic(settings, batcher, ml, metrics))
        erasure = ErasureService(histories, memory, agentic, ml)
        yield Services(memory, histories, agentic, ml, erasure, bridge, described)
