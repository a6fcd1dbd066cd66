"""Open the ml service from settings: its store where memory lives (the home region), its key, its HTTP client."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

from memory_plugin.metrics import Metrics
from memory_plugin.ml.config import Embeddings, MLSettings
from memory_plugin.ml.metrics import MLMetrics
from memory_plugin.ml.service import BUILT_IN, MLService
from memory_plugin.ml.stores import open_ml_store
from memory_plugin.settings import Settings


@asynccontextmanager
async def open_ml(
    settings: Settings, embedder: Embeddings, model: Mapping[str, Any], metrics: Metrics | None = None
) -> AsyncIterator[MLService]:
    store = open_ml_store(settings)
    await store.open()
    names = tuple(dict.fromkeys(name for name in (str(model.get("name", "")), BUILT_IN) if name))
    service = MLService(
        store,
        embedder,
        MLSettings.of(settings.ml, built_in_names=names, node_name=settings.node.name),
        MLMetrics(metrics.registry if metrics else None),
    )
    try:
        await service.open()
        yield service
    finally:
        await service.close()
        await store.close()
