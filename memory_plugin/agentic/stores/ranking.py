"""Ranking long-term memory: k-NN by cosine and BM25 on ``memory``, always inside a ``LongTermScope``
(owner, container, terms): the capability ``search`` and ``infer`` use."""

from __future__ import annotations

import abc

import numpy as np

from memory_plugin.agentic.stores.base import LongTermScope, StoredDoc


class LongTermRanking(abc.ABC):
    @abc.abstractmethod
    async def knn(self, scope: LongTermScope, vector: np.ndarray, k: int) -> list[tuple[StoredDoc, float]]:
        """Top ``k`` docs of the scope by cosine."""

    @abc.abstractmethod
    async def bm25(self, scope: LongTermScope, query: str, k: int) -> list[tuple[StoredDoc, float]]:
        """Top ``k`` docs of the scope by BM25 on ``memory``."""
