"""Open agentic memory from settings: its store in the home region, the LLM connector, the background tasks."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from embedder import AsyncEmbedder
from memory_plugin.agentic.connector import LLMSettings, OpenAIChat
from memory_plugin.agentic.metrics import AgenticMetrics
from memory_plugin.agentic.service import AgenticService
from memory_plugin.agentic.store import AgenticStore, SqliteAgenticStore
from memory_plugin.metrics import Metrics
from memory_plugin.settings import OpenSearchRegion, Settings


def agentic_store_for(settings: Settings) -> AgenticStore:
    """Agentic memory lives in the home region, as conversational memory does: its cluster, or SQLite."""
    home = settings.regions.get(settings.home_region)
    if isinstance(home, OpenSearchRegion):
        from memory_plugin.agentic.opensearch_store import OpenSearchAgenticStore

        return OpenSearchAgenticStore(home)
    return SqliteAgenticStore(settings.data_dir / "agentic.sqlite3")


@asynccontextmanager
async def open_agentic(
    settings: Settings, embedder: AsyncEmbedder, metrics: Metrics | None
) -> AsyncIterator[AgenticService]:
    store = agentic_store_for(settings)
    await store.open(embedder.dimension)
    llm = None
    if settings.agentic_llm_url:
        llm = OpenAIChat(
            LLMSettings(
                settings.agentic_llm_url,
                settings.agentic_llm_api_key,
                settings.agentic_llm_model,
                settings.agentic_llm_timeout,
            )
        )
    service = AgenticService(
        store,
        embedder,
        llm,
        enabled=settings.agentic_memory_enabled,
        retention_enabled=settings.agentic_retention_enabled,
        metrics=AgenticMetrics(metrics.registry if metrics else None),
    )
    try:
        await service.start()
        yield service
    finally:
        await service.stop()
        await store.close()
