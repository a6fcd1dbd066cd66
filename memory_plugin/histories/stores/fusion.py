"""Hybrid ranking: one region's dense and keyword lists fused by reciprocal rank (Cormack et al., 2009),
then each found chunk's neighbours in its user's timeline lifted by a share of its score, then each hit
by a share of the best evidence of its sitting (its user's run of hits without a long pause).

Ranks, not scores, are fused: a cosine and a BM25 score have no common scale, and BM25's differs
from region to region as a shard's does. A score is shown normalised to [0, 1]: 1.0 is first in both
lists with both neighbours first too. Every region's scores have that one meaning, so regions merge by
them fairly, and ``min_score`` says how far up the lists a hit must be.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Hashable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
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
#: A user's hits with no pause longer than this (microseconds: 30 minutes) between them are one sitting (a
#: session of a conversation). Each hit gains ``SITTING_SHARE`` of the summed scores of its sitting's
#: ``SITTING_BEST`` best hits: an answer is usually talked about where other parts of the question are.
SITTING_GAP = 30 * 60 * 1_000_000
SITTING_SHARE = 0.2
SITTING_BEST = 3
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
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


def sitting_scores(scores: Mapping[K, float], when: Mapping[K, tuple[str | None, int]]) -> dict[K, float]:
    """Each key's score lifted by ``SITTING_SHARE`` of its sitting's evidence: the sum of its ``SITTING_BEST``
    best scores. ``when``: each key's user and time (microseconds since the epoch).

    Sittings are read from the hits themselves: one user's hits sorted by time, split wherever two are more
    than ``SITTING_GAP`` apart. A sitting whose several turns match lifts them all; a lone match in a
    long-past sitting is not lifted. Scores stay within [0, 1].
    """
    timelines: dict[str | None, list[tuple[int, K]]] = defaultdict(list)
    for key in scores:
        user, at = when[key]
        timelines[user].append((at, key))
    evidence: dict[K, float] = {}
    for timeline in timelines.values():
        timeline.sort(key=lambda place: place[0])
        sittings: list[list[K]] = []
        last: int | None = None
        for at, key in timeline:
            if last is None or at - last > SITTING_GAP:
                sittings.append([])
            sittings[-1].append(key)
            last = at
        for sitting in sittings:
            best = sum(sorted((scores[key] for key in sitting), reverse=True)[:SITTING_BEST])
            evidence.update((key, best) for key in sitting)
    ceiling = 1.0 + SITTING_SHARE * SITTING_BEST
    return {
        key: round((score + SITTING_SHARE * evidence[key]) / ceiling, SCORE_DECIMALS) for key, score in scores.items()
    }


def micros(moment: datetime) -> int:
    """Microseconds since the epoch, as the embedded store keeps ``record_created_at``."""
    return (moment - EPOCH) // timedelta(microseconds=1)


def lift_sittings(hits: Sequence[Hit]) -> list[Hit]:
    """``sitting_scores`` on hits, best first; ties by record id, then chunk."""
    when = {hit.id: (hit.record.user_id, micros(hit.record.record_created_at)) for hit in hits}
    scores = sitting_scores({hit.id: hit.score for hit in hits}, when)
    lifted = [dataclasses.replace(hit, score=scores[hit.id]) for hit in hits]
    lifted.sort(key=lambda hit: (-hit.score, hit.record.record_id, hit.chunk_index))
    return lifted
