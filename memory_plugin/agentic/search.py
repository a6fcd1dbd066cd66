"""Semantic and hybrid search of long-term memory: k-NN by the container's embedding model, and BM25 beside it
combined as OpenSearch's hybrid query does (min-max normalised, weighted arithmetic mean)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from memory_plugin.agentic.containers import Containers
from memory_plugin.agentic.llm import ContainerModels
from memory_plugin.agentic.memory_requests import LongTermSearchInput
from memory_plugin.agentic.metrics import AgenticMetrics
from memory_plugin.agentic.models import (
    LONG_TERM,
    Container,
)
from memory_plugin.agentic.results import RankedMemories
from memory_plugin.agentic.stores.base import LongTermScope, StoredDoc
from memory_plugin.agentic.stores.memories import MemoryDocStore
from memory_plugin.agentic.stores.ranking import LongTermRanking
from memory_plugin.agentic.views import cosine_score, took
from memory_plugin.auth import Principal
from memory_plugin.dsl import SearchBody, bounded, matching
from memory_plugin.errors import InvalidArgument


async def matching_ids(query: SearchBody, docs: list[StoredDoc]) -> tuple[list[str], bool]:
    """Ids of the docs the query matches, and whether the evaluation ran out of budget (off the event loop)."""
    rows = [(doc.id, doc.source) for doc in docs]
    return await bounded(lambda budget: matching(query, rows, budget=budget))


def min_max(scores: Mapping[str, float]) -> dict[str, float]:
    """OpenSearch's ``min_max`` normalisation: 1.0 for a lone or uniform list, at least 0.001 for any hit."""
    if not scores:
        return {}
    low, high = min(scores.values()), max(scores.values())
    if high == low:
        return {key: 1.0 for key in scores}
    return {key: max((value - low) / (high - low), 0.001) for key, value in scores.items()}


def hybrid_scores(
    bm25: Mapping[str, float], neural: Mapping[str, float], bm25_weight: float, neural_weight: float
) -> dict[str, float]:
    """Min-max normalise each list, then the weighted arithmetic mean (a doc absent from a list scores 0 there)."""
    lexical, semantic = min_max(bm25), min_max(neural)
    total = bm25_weight + neural_weight
    return {
        key: (bm25_weight * lexical.get(key, 0.0) + neural_weight * semantic.get(key, 0.0)) / total
        for key in {**lexical, **semantic}
    }


@dataclass(frozen=True)
class LongTermSearch:
    """A checked semantic or hybrid search: its container, the docs it ranks, and what it asks."""

    container: Container
    scope: LongTermScope
    request: LongTermSearchInput
    #: The ``filter``'s evaluation ran out of budget: only the docs it examined could be found.
    timed_out: bool = False

    def result(self, scored: list[tuple[StoredDoc, float]], started: float) -> RankedMemories:
        index = self.container.index(LONG_TERM)
        return RankedMemories(index, scored, self.request.min_score, self.timed_out, took(started))


class LongTermSearcher:
    def __init__(
        self,
        ranking: LongTermRanking,
        containers: Containers,
        models: ContainerModels,
        metrics: AgenticMetrics,
        *,
        memory_docs: MemoryDocStore,
    ) -> None:
        """``memory_docs``: the long-term docs a ``filter`` is evaluated on."""
        self.ranking = ranking
        self.memory_docs = memory_docs
        self.containers = containers
        self.models = models
        self.metrics = metrics

    async def semantic(self, owner: Principal, container_id: str, request: LongTermSearchInput) -> RankedMemories:
        search = await self._checked(owner, container_id, request, "Semantic")
        started = time.perf_counter()
        vector = await self._query_vector(owner, search)
        found = await self.ranking.knn(search.scope, vector, request.k)
        self.metrics.searches.labels("semantic").inc()
        return search.result([(doc, cosine_score(cosine)) for doc, cosine in found], started)

    async def hybrid(self, owner: Principal, container_id: str, request: LongTermSearchInput) -> RankedMemories:
        search = await self._checked(owner, container_id, request, "Hybrid")
        started = time.perf_counter()

        async def neural() -> list[tuple[StoredDoc, float]]:
            return await self.ranking.knn(search.scope, await self._query_vector(owner, search), request.k)

        # BM25 needs no vector: it runs while the model embeds the query
        lexical, semantic = await asyncio.gather(self.ranking.bm25(search.scope, request.query, request.k), neural())
        docs = {doc.id: doc for doc, _ in lexical + semantic}
        combined = hybrid_scores(
            {doc.id: score for doc, score in lexical},
            {doc.id: cosine_score(cosine) for doc, cosine in semantic},
            request.bm25_weight,
            request.neural_weight,
        )
        ranked = sorted(combined.items(), key=lambda item: (-item[1], docs[item[0]].seq))[: request.k]
        self.metrics.searches.labels("hybrid").inc()
        return search.result([(docs[key], score) for key, score in ranked], started)

    async def _query_vector(self, owner: Principal, search: LongTermSearch) -> np.ndarray:
        choice = search.container.embedding
        embedding = await self.models.embedding(search.container.owner or owner, choice)  # the owner's models
        return await self.models.query_vector(embedding, choice, search.request.query)

    async def _checked(
        self, owner: Principal, container_id: str, request: LongTermSearchInput, kind: str
    ) -> LongTermSearch:
        """A search against its container, which needs long-term memory, and the docs its ``filter`` leaves."""
        container = await self.containers.load(owner, container_id)
        config = container.config
        if not config.get("embedding_model_id") or not config.get("strategies") or not container.has(LONG_TERM):
            raise InvalidArgument(
                f"{kind} search needs a memory container with an embedding model, an LLM and at least one strategy; "
                f"memory container {container_id} has no long-term memory"
            )
        only_ids, timed_out = None, False
        if request.filter is not None:
            docs = await self.memory_docs.docs(owner, container_id, LONG_TERM)
            ids, timed_out = await matching_ids(request.filter, docs)
            only_ids = set(ids)
        scope = LongTermScope(owner, container_id, request.terms, only_ids)
        return LongTermSearch(container, scope, request, timed_out)
