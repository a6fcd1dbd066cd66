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
        section = settings.agentic
        llm = None
        if section.llm.url:
            llm = OpenAIChat(LLMSettings(section.llm.url, section.llm.api_key, section.llm.model, section.llm.timeout))
        service = AgenticService(
            store,
            embedder,
            llm,
            models=models,
            enabled=section.enabled,
            retention_enabled=section.retention.enabled,
            retention_defaults=RetentionDefaults.of(section.retention),
            retention_interval=section.retention.interval,
            metrics=AgenticMetrics(metrics.registry if metrics else None),
            forgetting=section.forgetting,
        )
        try:
            await service.start()
            yield service
        finally:
            await service.stop()
