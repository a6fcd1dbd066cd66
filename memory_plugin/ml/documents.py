"""What every ML service does with its documents in the ml store: search them as ml-commons' index would,
and replace one only at the version it was read at."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from memory_plugin.auth import Principal
from memory_plugin.dsl import SearchBody, bounded, execute
from memory_plugin.errors import StatusError
from memory_plugin.ml.results import Found
from memory_plugin.ml.stores.base import Kind, MLStore, Stored
from memory_plugin.ml.views import api_version


async def search_kind(
    store: MLStore,
    owner: Principal,
    kind: Kind,
    query: SearchBody,
    index: str,
    view: Callable[[Mapping[str, Any]], dict[str, Any]],
) -> Found:
    """``query`` over the owner's documents of ``kind``, each as ``view`` shows it in a search."""
    started = time.perf_counter()
    documents = [(s.id, view(s.source), api_version(s)) for s in await store.all(kind, owner)]
    results = await bounded(lambda budget: execute(query, documents, budget=budget))
    return Found(index, results, int((time.perf_counter() - started) * 1000))


async def replace(store: MLStore, kind: Kind, owner: Principal, stored: Stored, source: dict[str, Any]) -> None:
    """Write ``source`` over ``stored``, or a 409 when another request wrote it since it was read."""
    if not await store.replace(kind, owner, stored, source):
        raise StatusError(f"the {kind.replace('_', ' ')} was changed by another request; read it again", 409)
