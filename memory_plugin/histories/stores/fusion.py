"""Hybrid ranking: one region's dense and keyword lists fused by reciprocal rank (Cormack et al., 2009),
then each found chunk's neighbours in its user's timeline lifted by a share of its score.

Ranks, not scores, are fused: a cosine and a BM25 score have no common scale, and BM25's differs
from region to region as a shard's does. A score is shown normalised to [0, 1]: 1.0 is first in both
lists with both neighbours first too. Every region's scores have that one meaning, so regions merge by
them fairly, and ``min_score`` says how far up the lists a hit must be.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable, Mapping, Sequence
from typing import TypeVar

from memory_plugin.histories.stores.records import SCORE_DECIMALS, Hit

#: Weights and constants chosen on LoCoMo over all its question categories (``scripts/bench_locomo.py``).
#: The rank constant: small, so that the first few places of a list count most (k = 60 in the paper,
#: for long lists of documents; on LoCoMo's turns k = 10 found more evidence at every depth).
RANK_CONSTANT = 10
DENSE_WEIGHT = 1.0
KEYWORD_WEIGHT = 1.5
#: How deep each list is read before fusing: a hit below this in both lists could not rank in a top 100.
CANDIDATES = 100
#: The share of a hit's fused score that each of its neighbours gains (``spread``), and how many of the best
#: fused hits lend it: below that, a share is too small to move a hit into the first hundred.
NEIGHBOUR_SHARE = 0.25
LENDERS = 50
K = TypeVar("K", bound=Hashable)


def fused_scores(dense: Sequence[K], keyword: Sequence[K]) -> dict[K, float]:
    """Each key of either list (best first) with its weighted reciprocal rank, normalised and rounded as shown."""
    best = (DENSE_WEIGHT + KEYWORD_WEIGHT) / (RANK_CONSTANT + 1)
    scores: dict[K, float] = {}
    for weight, keys in ((DENSE_WEIGHT, dense), (KEYWORD_WEIGHT, keyword)):
        for rank, key in enumerate(keys, start=1):
            scores[key] = scores.get(key, 0.0) + weight / (RANK_CONSTANT + rank)
    return {key: round(score / best, SCORE_DECIMALS) for key, score in scores.items()}


def spread_scores(fused: Sequence[tuple[K, float]], neighbours: Mapping[K, Sequence[K]]) -> dict[K, float]:
    """``spread``'s scores, from the fused ``(key, score)`` best first and each key's visible neighbours."""
    scores = dict(fused)
    for key, score in fused:
        for neighbour in neighbours.get(key, ()):
            scores[neighbour] = scores.get(neighbour, 0.0) + NEIGHBOUR_SHARE * score
    ceiling = 1.0 + 2 * NEIGHBOUR_SHARE
    return {key: round(score / ceiling, SCORE_DECIMALS) for key, score in scores.items()}


def fuse(dense: Sequence[Hit], keyword: Sequence[Hit]) -> list[Hit]:
    """The union of both lists by weighted reciprocal rank, best first; ties by record id, then chunk."""
    found: dict[str, Hit] = {}
    for hit in (*dense, *keyword):
        found.setdefault(hit.id, hit)
    scores = fused_scores([hit.id for hit in dense], [hit.id for hit in keyword])
    fused = [dataclasses.replace(hit, score=scores[key]) for key, hit in found.items()]
    fused.sort(key=lambda hit: (-hit.score, hit.record.record_id, hit.chunk_index))
    return fused


def spread(fused: Sequence[Hit], neighbours: Mapping[str, Sequence[Hit]]) -> list[Hit]:
    """Each hit's neighbours (the chunks just before and after it) gain ``NEIGHBOUR_SHARE`` of its score.

    What answers a question is often said over two or three turns, and a turn between two found ones is
    likely part of it. Scores stay within [0, 1]: 1.0 is first in both lists with both neighbours first too.
    """
    found = {hit.id: hit for hit in fused}
    for hits in neighbours.values():
        for neighbour in hits:
            found.setdefault(neighbour.id, neighbour)
    keys = {key: [hit.id for hit in hits] for key, hits in neighbours.items()}
    scores = spread_scores([(hit.id, hit.score) for hit in fused], keys)
    spread_hits = [dataclasses.replace(hit, score=scores[key]) for key, hit in found.items()]
    spread_hits.sort(key=lambda hit: (-hit.score, hit.record.record_id, hit.chunk_index))
    return spread_hits
