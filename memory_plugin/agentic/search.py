"""Semantic and hybrid search of long-term memory: k-NN by the container's embedding model, and BM25 beside it
combined as OpenSearch's hybrid query does (min-max normalised, weighted arithmetic mean)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from memory_plugin.agentic.containers import Containers
from memory_plugin.agentic.llm import ContainerModels
from memory_plugin.agentic.metrics import AgenticMetrics
from memory_plugin.agentic.models import (
    LONG_TERM,
    MAX_K,
    MAX_SEARCH_TERMS,
    Container,
    flat_object_terms,
)
from memory_plugin.agentic.requests import Body, integer, number, required, string_map, text, without_nested
from memory_plugin.agentic.stores.base import LongTermScope, StoredDoc
from memory_plugin.agentic.stores.memories import MemoryDocStore
from memory_plugin.agentic.stores.opensearch_documents import NESTED_PATHS
from memory_plugin.agentic.stores.ranking import LongTermRanking
from memory_plugin.agentic.views import cosine_score, ranked_response
from memory_plugin.auth import Principal
from memory_plugin.dsl import SearchBody, bounded, matching, parse_search
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
    """A checked semantic or hybrid search: its container, the docs it ranks, its text, ``k`` and ``min_score``."""

    container: Container
    scope: LongTermScope
    query: str
    k: int
    min_score: float | None
    #: The ``filter``'s evaluation ran out of budget: only the docs it examined could be found.
    timed_out: bool = False

    def response(self, scored: list[tuple[StoredDoc, float]], started: float) -> dict[str, Any]:
        index = self.container.index(LONG_TERM)
        return ranked_response(index, scored, self.min_score, self.timed_out, started)


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

    async def semantic(self, owner: Principal, container_id: str, body: Body) -> dict[str, Any]:
        search = await self._checked(owner, container_id, body, "Semantic")
        started = time.perf_counter()
        vector = await self._query_vector(owner, search)
        found = await self.ranking.knn(search.scope, vector, search.k)
        self.metrics.searches.labels("semantic").inc()
        return search.response([(doc, cosine_score(cosine)) for doc, cosine in found], started)

    async def hybrid(self, owner: Principal, container_id: str, body: Body) -> dict[str, Any]:
        weights = {}
        for name in ("bm25_weight", "neural_weight"):
            value = number(body or {}, name)
            weights[name] = 0.5 if value is None else value
            if not 0.0 <= weights[name] <= 1.0:
                raise InvalidArgument(f"{name} must be between 0.0 and 1.0", parameter=name)
        if abs(weights["bm25_weight"] + weights["neural_weight"] - 1.0) > 0.001:
            raise InvalidArgument("bm25_weight and neural_weight must sum to 1.0", parameter="bm25_weight")
        search = await self._checked(owner, container_id, body, "Hybrid")
        started = time.perf_counter()

        async def neural() -> list[tuple[StoredDoc, float]]:
            return await self.ranking.knn(search.scope, await self._query_vector(owner, search), search.k)

        # BM25 needs no vector: it runs while the model embeds the query
        lexical, semantic = await asyncio.gather(self.ranking.bm25(search.scope, search.query, search.k), neural())
        docs = {doc.id: doc for doc, _ in lexical + semantic}
        combined = hybrid_scores(
            {doc.id: score for doc, score in lexical},
            {doc.id: cosine_score(cosine) for doc, cosine in semantic},
            weights["bm25_weight"],
            weights["neural_weight"],
        )
        ranked = sorted(combined.items(), key=lambda item: (-item[1], docs[item[0]].seq))[: search.k]
        self.metrics.searches.labels("hybrid").inc()
        return search.response([(docs[key], score) for key, score in ranked], started)

    async def _query_vector(self, owner: Principal, search: LongTermSearch) -> np.ndarray:
        config = search.container.config
        embedding = await self.models.embedding(search.container.owner or owner, config)  # the owner's models
        return await self.models.query_vector(embedding, config, search.query)

    async def _checked(self, owner: Principal, container_id: str, body: Body, kind: str) -> LongTermSearch:
        """Validate a semantic or hybrid search body (AGENTIC.md 4.7, 4.8) against its container."""
        body = required(body)
        query = text(body, "query")
        if query is None or not query.strip():
            raise InvalidArgument("query cannot be null or blank", parameter="query")
        k = integer(body, "k")
        k = 10 if k is None else k
        if not 1 <= k <= MAX_K:
            raise InvalidArgument("k must be between 1 and 10000", parameter="k")
        terms = flat_object_terms({name: string_map(body, name) for name in ("namespace", "tags")})
        if len(terms) > MAX_SEARCH_TERMS:
            raise InvalidArgument(
                f"namespace and tags hold {len(terms)} terms; a search may filter on at most {MAX_SEARCH_TERMS}",
                parameter=max(("namespace", "tags"), key=lambda name: len(body.get(name) or ())),
            )
        min_score = number(body, "min_score")
        dsl_filter = body.get("filter")
        if dsl_filter is not None and not isinstance(dsl_filter, dict):
            raise InvalidArgument("[filter] must be a query object", parameter="filter")
        parsed_filter = (
            parse_search({"query": without_nested(dsl_filter, NESTED_PATHS[LONG_TERM]), "size": 0})
            if dsl_filter
            else None
        )
        container = await self.containers.load(owner, container_id)
        config = container.config
        if not config.get("embedding_model_id") or not config.get("strategies") or not container.has(LONG_TERM):
            raise InvalidArgument(
                f"{kind} search needs a memory container with an embedding model, an LLM and at least one strategy; "
                f"memory container {container_id} has no long-term memory"
            )
        only_ids, timed_out = None, False
        if parsed_filter is not None:
            docs = await self.memory_docs.docs(owner, container_id, LONG_TERM)
            ids, timed_out = await matching_ids(parsed_filter, docs)
            only_ids = set(ids)
        scope = LongTermScope(owner, container_id, terms, only_ids)
        return LongTermSearch(container, scope, query, k, min_score, timed_out)
