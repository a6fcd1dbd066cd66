"""Open agentic memory from settings: its store in the home region, the LLM connector, the background tasks."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from embedder import AsyncEmbedder
from memory_plugin.agentic.connector import LLMSettings, OpenAIChat
from memory_plugin.agentic.llm import RegisteredModels
from memory_plugin.agentic.metrics import AgenticMetrics
from memory_plugin.agentic.retention_settings import RetentionDefaults
from memory_plugin.agentic.service import AgenticService
from memory_plugin.agentic.stores import open_agentic_store
from memory_plugin.metrics import Metrics
from memory_plugin.settings import Settings


@asynccontextmanager
async def open_agentic(
    settings: Settings, embedder: AsyncEmbedder, models: RegisteredModels, metrics: Metrics | None
) -> AsyncIterator[AgenticService]:
    """``models``: the owners' registered models, which a container's ``llm_id`` and ``embedding_model_id`` name."""
    async with open_agentic_store(settings, embedder.dimension) as store:
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
            models=models,
            enabled=settings.agentic_memory_enabled,
            retention_enabled=settings.agentic_retention_enabled,
            retention_defaults=RetentionDefaults(
                settings.agentic_retention_default_session_retention_days,
                settings.agentic_retention_default_session_max_count,
                settings.agentic_retention_default_long_term_max_count,
                settings.agentic_retention_default_history_max_count,
                settings.agentic_working_memory_ttl_days,
            ),
            retention_interval=settings.agentic_retention_interval,
            metrics=AgenticMetrics(metrics.registry if metrics else None),
            forgetting=settings.agentic_forgetting,
        )
        try:
            await service.start()
            yield service
        finally:
            await service.stop()
