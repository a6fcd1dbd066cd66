"""Build each region's store from its settings."""

from __future__ import annotations

from memory_plugin.settings import EmbeddedRegion, Settings
from memory_plugin.stores.base import VectorStore
from memory_plugin.stores.embedded import EmbeddedStore


def region_store(settings: Settings, name: str) -> VectorStore:
    region = settings.regions[name]
    if isinstance(region, EmbeddedRegion):
        return EmbeddedStore(settings.region_path(name))
    from memory_plugin.stores.opensearch import OpenSearchStore

    return OpenSearchStore(region, name)
