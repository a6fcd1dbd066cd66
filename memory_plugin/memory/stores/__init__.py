"""The memory stores: one interface (base), SQLite and OpenSearch behind it."""

from __future__ import annotations

from memory_plugin.memory.stores.base import MemoryStore
from memory_plugin.settings import OpenSearchRegion, Settings


def open_memory_store(settings: Settings) -> MemoryStore:
    """Memory lives in the home region: its OpenSearch cluster, or SQLite under the data folder."""
    home = settings.regions.get(settings.home_region)
    if isinstance(home, OpenSearchRegion):
        from memory_plugin.memory.stores.opensearch import OpenSearchMemoryStore

        return OpenSearchMemoryStore(home, outbox=settings.bridge.enabled)
    from memory_plugin.memory.stores.sqlite import SqliteMemoryStore

    return SqliteMemoryStore(settings.data_dir / "memory.sqlite3", outbox=settings.bridge.enabled)
