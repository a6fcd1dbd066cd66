"""``fusion``'s scores over arrays of candidate positions, for the embedded store's hybrid ranking.

The same arithmetic as ``fusion.fused_scores``, ``spread_scores`` and ``sitting_scores`` in the same order, so the
scores are the same to the bit (``tests/unit/test_fusion_arrays.py``): their dict loops, sorts by tuple and a
``round`` per score per step were most of a hybrid search's fixed cost (about 1.5 ms of thread CPU per search at
any store size). A candidate is a position into the caller's list of chunks; ``ties`` ranks them by what hits tie
by (record id, then chunk index).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from memory_plugin.histories.stores.fusion import (
    DENSE_WEIGHT,
    KEYWORD_WEIGHT,
    NEIGHBOUR_SHARE,
    RANK_CONSTANT,
    SITTING_BEST,
    SITTING_GAP,
    SITTING_SHARE,
)
from memory_plugin.histories.stores.records import SCORE_DECIMALS

_SCALE = 10.0**SCORE_DECIMALS


def rounded(values: np.ndarray) -> np.ndarray:
    """``round(value, SCORE_DECIMALS)`` of each value, to the bit.

    numpy rounds ``value * 10**d`` to an integer and divides it back, as ``round`` does with the correctly rounded
    decimal; the two integers differ only where the scaled value is within an ulp or so of a half, and those few
    (none in most searches) go through ``round`` itself.
    """
    scaled = values * _SCALE
    out: np.ndarray = np.rint(scaled) / _SCALE
    doubtful = ~(np.abs(scaled - np.floor(scaled) - 0.5) > 1e-6) | ~(np.abs(scaled) < 1e12)
    for at in np.flatnonzero(doubtful).tolist():
        out[at] = round(float(values[at]), SCORE_DECIMALS)
    return out


def best_first(scores: np.ndarray, ties: np.ndarray) -> np.ndarray:
    """Positions by score, highest first, then by tie rank: ``sorted(key=(-score, tie))``."""
    order: np.ndarray = np.lexsort((ties, -scores))
    return order


def fused_scores(dense: np.ndarray, keyword: np.ndarray, size: int) -> np.ndarray:
    """``fusion.fused_scores`` of two lists of positions (best first, each position once) among ``size``."""
    scores = np.zeros(size)
    scores[dense] = DENSE_WEIGHT / (RANK_CONSTANT + np.arange(1, len(dense) + 1, dtype=np.float64))
    scores[keyword] += KEYWORD_WEIGHT / (RANK_CONSTANT + np.arange(1, len(keyword) + 1, dtype=np.float64))
    return rounded(scores / ((DENSE_WEIGHT + KEYWORD_WEIGHT) / (RANK_CONSTANT + 1)))


def spread_scores(
    fused: np.ndarray, size: int, lenders: Sequence[int], neighbours: Sequence[Sequence[int]]
) -> np.ndarray:
    """``fusion.spread_scores``: the fused scores (of the first ``len(fused)`` of ``size`` positions; the rest are
    neighbours only) with each lender's share added to its neighbours', lender by lender in the given order."""
    raw = [*fused.tolist(), *[0.0] * (size - len(fused))]
    lent = fused[np.asarray(lenders, dtype=np.intp)].tolist() if len(lenders) else []
    for score, near in zip(lent, neighbours):
        for position in near:
            raw[position] += NEIGHBOUR_SHARE * score
    return rounded(np.asarray(raw) / (1.0 + 2 * NEIGHBOUR_SHARE))


def sitting_scores(scores: np.ndarray, users: np.ndarray, times: np.ndarray) -> np.ndarray:
    """``fusion.sitting_scores``: ``users`` codes each position's user (None is one user too, as there), ``times``
    its record's time in microseconds. The best three of a sitting are summed highest first from 0, as ``sum``
    of a sorted list does."""
    size = len(scores)
    if not size:
        return rounded(scores)
    timeline = np.lexsort((times, users))
    user, at = users[timeline], times[timeline]
    starts = np.ones(size, dtype=bool)
    starts[1:] = (user[1:] != user[:-1]) | (at[1:] - at[:-1] > SITTING_GAP)
    sitting = np.empty(size, dtype=np.intp)
    sitting[timeline] = np.cumsum(starts) - 1
    ranked = np.lexsort((-scores, sitting))  # each sitting's positions, best first
    of = sitting[ranked]
    first = np.ones(size, dtype=bool)
    first[1:] = of[1:] != of[:-1]
    place = np.arange(size) - np.maximum.accumulate(np.where(first, np.arange(size), 0))
    best = np.zeros(int(of[-1]) + 1)
    for nth in range(SITTING_BEST):
        taken = place == nth
        best[of[taken]] = best[of[taken]] + scores[ranked[taken]]
    evidence = best[sitting]
    return rounded((scores + SITTING_SHARE * evidence) / (1.0 + SITTING_SHARE * SITTING_BEST))
