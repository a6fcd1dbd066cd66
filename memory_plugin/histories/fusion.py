"""Hybrid ranking: one region's dense and keyword lists fused by reciprocal rank (Cormack et al., 2009).

Ranks, not scores, are fused: a cosine and a BM25 score have no common scale, and BM25's differs
from region to region as a shard's does. A fused score is shown normalised to [0, 1]: 1.0 is first
in both lists, and a hit first in one list and absent from the other scores ``DENSE_WEIGHT`` or
``KEYWORD_WEIGHT`` over their sum. Every region's scores have that one meaning, so regions merge by
them fairly, and ``min_score`` says how far up the lists a hit must be.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from memory_plugin.histories.stores.records import SCORE_DECIMALS, Hit

#: The rank constant: small, so that the first few places of a list count most (k = 60 in the paper,
#: for long lists of documents; on LoCoMo's turns k = 10 found more evidence at every depth).
RANK_CONSTANT = 10
DENSE_WEIGHT = 1.0
KEYWORD_WEIGHT = 1.0
#: How deep each list is read before fusing: a hit below this in both lists could not rank in a top 100.
CANDIDATES = 100


def fuse(dense: Sequence[Hit], keyword: Sequence[Hit]) -> list[Hit]:
    """The union of both lists by weighted reciprocal rank, best first; ties by record id, then chunk."""
    best = (DENSE_WEIGHT + KEYWORD_WEIGHT) / (RANK_CONSTANT + 1)
    scores: dict[str, float] = {}
    found: dict[str, Hit] = {}
    for weight, hits in ((DENSE_WEIGHT, dense), (KEYWORD_WEIGHT, keyword)):
        for rank, hit in enumerate(hits, start=1):
            scores[hit.id] = scores.get(hit.id, 0.0) + weight / (RANK_CONSTANT + rank)
            found.setdefault(hit.id, hit)
    fused = [dataclasses.replace(hit, score=round(scores[key] / best, SCORE_DECIMALS)) for key, hit in found.items()]
    fused.sort(key=lambda hit: (-hit.score, hit.record.record_id, hit.chunk_index))
    return fused
