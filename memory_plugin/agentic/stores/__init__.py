"""The agentic stores: one interface per capability (``backend`` lists them), SQLite and OpenSearch behind them."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from memory_plugin.agentic.stores.backend import AgenticStore
from memory_plugin.settings import OpenSearchRegion, Settings


@asynccontextmanager
async def open_agentic_store(settings: Settings, dimension: int) -> AsyncIterator[AgenticStore]:
    """Agentic memory lives in the home region, as conversational memory does: its cluster, or SQLite.
    ``dimension`` is the built-in embedding model's."""
    home = settings.regions.get(settings.home_region)
    store: AgenticStore
    if isinstance(home, OpenSearchRegion):
        from memory_plugin.agentic.stores.opensearch import OpenSearchAgenticStore
        from memory_plugin.agentic.stores.opensearch_queues import lease_seconds

        model_timeout = max(settings.agentic.llm.timeout, settings.ml.connector_timeout)
        store = OpenSearchAgenticStore(home, lease_seconds(model_timeout))
    else:
        from memory_plugin.agentic.stores.sqlite import SqliteAgenticStore

        store = SqliteAgenticStore(settings.data_dir / "agentic.sqlite3")
    await store.open(dimension)
    try:
        yield store
    finally:
        await store.close()
