"""Where models, connectors, model groups and tasks live: SQLite in the data folder, or an OpenSearch index."""

from __future__ import annotations

from memory_plugin.ml.stores.base import MLStore
from memory_plugin.settings import OpenSearchRegion, Settings


def open_ml_store(settings: Settings) -> MLStore:
    """The ml store lives where memory does (the home region): its OpenSearch cluster, or SQLite in the data folder."""
    home = settings.regions.get(settings.home_region)
    if isinstance(home, OpenSearchRegion):
        from memory_plugin.ml.stores.opensearch import OpenSearchMLStore

        return OpenSearchMLStore(home)
    from memory_plugin.ml.stores.sqlite import SqliteMLStore

    return SqliteMLStore(settings.data_dir / "ml.sqlite3")
