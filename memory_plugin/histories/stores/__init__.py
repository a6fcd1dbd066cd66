"""The histories region stores: one interface (base), SQLite + faiss and OpenSearch behind it."""

from __future__ import annotations

from memory_plugin.histories.stores.base import HistoryStore
from memory_plugin.settings import EmbeddedRegion, Settings


def open_histories_store(settings: Settings, name: str) -> HistoryStore:
    """Region ``name``'s store: SQLite + faiss in its folder, or its OpenSearch cluster.

    Each is imported here, when chosen, so that reading a filter or a record loads neither faiss nor an HTTP client.
    """
    region = settings.regions[name]
    if isinstance(region, EmbeddedRegion):
        from memory_plugin.histories.stores.sqlite import SqliteHistoryStore

        return SqliteHistoryStore(
            settings.region_path(name), metadata_columns=region.metadata_columns, filter_cache_mb=region.filter_cache_mb
        )
    from memory_plugin.histories.stores.opensearch import OpenSearchHistoryStore

    return OpenSearchHistoryStore(region, name)
