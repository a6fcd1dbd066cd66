"""The embedded lexical engine's top k (``lexical_index``): block-max MaxScore over a shard's term lists.

Segments (``SEGMENT`` consecutive ordinals) are scored best bound first in growing batches; a segment whose
bound is below the k-th score so far is never read, and within a batch a term whose bound there (with every
weaker term's) is below it is only looked up at the docs a stronger term holds.  Work is proportional to
the postings of the segments read: a batch takes its terms' postings as slices of each chosen segment
(a term's ordinals ascend, so its segments are contiguous runs) and scores the docs they name into a
row of the shard's size, never a pass over every posting of a common word in every batch.

Those few numpy calls per term per batch cost more than the postings they skip until the query's terms hold
a few hundred thousand postings: below ``EVERY_POSTINGS``, every posting is scored at once (``TopK.every``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

K1, B = 1.2, 0.75
#: Docs per frozen segment: the unit that is bounded, skipped or scored.
SEGMENT = 1024
#: A margin far above rounding (bounds sum in another order than scores) and far below 1e-6.
_SLACK, _FLOOR = 1e-9, 1e-12
_NONE = np.zeros(0, dtype=np.int64)
#: Segments scored in the first batch, and each batch's growth: every batch costs a few numpy calls per term.
FIRST_BATCH, GROWTH = 2, 2
#: Up to this many postings of the query's terms, scoring them all (``TopK.every``) is faster than skipping
#: segments (``TopK.run``), whose numpy calls per term per batch cost more than the postings they skip. Thread
#: CPU p50 of six-word Zipf queries, run / every: 100k docs 1.1 / 0.4 ms (under 1,200 postings) to 5.3 / 3.1
#: (170k-270k); 1M docs 3.9 / 1.5 (under 12k), 11.2 / 7.9 (110k-330k), 13.8 / 13.6 (330k-660k), then run ahead
#: (top 100; the top 10 likewise: 10.9 / 9.6 at 110k-330k, run ahead from 330k).
EVERY_POSTINGS = 1 << 18


@dataclass(frozen=True)
class TermList:
    """One term's postings over a shard's first ``len(max_tf)`` segments, and per segment its largest
    frequency and shortest doc (0 and 1 where it has none)."""

    term: int
    ords: np.ndarray
    tfs: np.ndarray
    max_tf: np.ndarray
    min_dl: np.ndarray


@dataclass(frozen=True)
class Postings:
    """A term's gathered list over the frozen segments and its postings among the docs after them (the tail,
    one more segment; its largest frequency 0 and shortest doc 1 where it has none)."""

    frozen: TermList
    tail_ords: np.ndarray
    tail_tfs: np.ndarray
    tail_max_tf: float = 0.0
    tail_min_dl: float = 1.0


def fts5_weight(rows: int, n: int) -> float:
    """FTS5's idf: negative for a word in more than half of the rows, where it is floored at 1e-6."""
    idf = math.log((rows - n + 0.5) / (n + 0.5))
    return idf if idf > 0.0 else 1e-6


def lucene_weight(rows: int, n: int) -> float:
    """Lucene's idf, over (k1 + 1): the saturation here is FTS5's ``tf (k1 + 1) / (tf + norm)``, Lucene's has
    no (k1 + 1).  A word said in every other turn still counts."""
    return math.log1p((rows - n + 0.5) / (n + 0.5)) / (K1 + 1.0)


def saturation(tf: np.ndarray, dl: np.ndarray, avgdl: float) -> np.ndarray:
    """BM25's term-frequency part: rises with tf, falls with the doc's length (0 where tf is 0)."""
    return (tf * (K1 + 1.0)) / (tf + K1 * (1.0 - B + B * dl / avgdl))


def _runs(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """The positions ``[starts[i], ends[i])`` of every i, concatenated."""
    lengths = ends - starts
    total = int(lengths.sum())
    if not total:
        return np.zeros(0, dtype=np.int64)
    shift = np.repeat(starts - (np.cumsum(lengths) - lengths), lengths)
    return shift + np.arange(total, dtype=np.int64)


class TopK:
    """One search: ``run`` gives the top k ordinals and their scores; ``scored`` counts the postings read."""

    def __init__(
        self, terms: Sequence[Postings], weights: Sequence[float], doclen: np.ndarray, avgdl: float, frozen: int
    ) -> None:
        self.terms, self.weights, self.doclen, self.avgdl, self.frozen = terms, weights, doclen, avgdl, frozen
        self.scored = 0
        edges = np.arange(frozen + 1, dtype=np.int64) * SEGMENT
        #: Per term, where each frozen segment's postings start in its list (the last: where the frozen end).
        self.starts = [np.searchsorted(found.frozen.ords, edges) for found in terms]
        #: Per ordinal: its score so far.
        self.scores = np.zeros(len(doclen))

    def postings(self) -> int:
        """How many postings the query's terms hold in the docs searched: ``every``'s work."""
        return sum(int(starts[-1]) + len(found.tail_ords) for starts, found in zip(self.starts, self.terms))

    def every(self, k: int, ok: Callable[[np.ndarray], np.ndarray], seqs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``run``'s answer from every posting scored at once: a few numpy calls per term, where ``run`` makes a
        few per term per batch of segments. The same sums in the same order, so the same scores to the bit."""
        scores = self.scores
        for i, found in enumerate(self.terms):
            end = int(self.starts[i][-1])
            for ords, tfs in ((found.frozen.ords[:end], found.frozen.tfs[:end]), (found.tail_ords, found.tail_tfs)):
                self.scored += len(ords)
                norm = K1 * (1.0 - B + B * self.doclen[ords] / self.avgdl)
                scores[ords] += self.weights[i] * ((tfs * (K1 + 1.0)) / (tfs + norm))
        docs = np.flatnonzero(scores > 0.0)  # every weight and saturation is positive (a mask: 6x faster than floats)
        docs = docs[ok(docs)]
        if len(docs) > k > 0:
            cut = scores[docs[np.argpartition(-scores[docs], k - 1)[k - 1]]]
            docs = docs[scores[docs] >= cut]  # the k-th score's ties too: the lower seqs among them go first
        top = docs[np.lexsort((seqs[docs], -scores[docs]))[:k]]
        return top, scores[top]

    def _bound(self) -> None:
        """Each term's best score in each segment (the tail is one more, empty or not), and their sums."""
        bounds = np.zeros((len(self.terms), self.frozen + 1))
        for i, (found, weight) in enumerate(zip(self.terms, self.weights)):
            max_tf = np.append(found.frozen.max_tf[: self.frozen], found.tail_max_tf)
            min_dl = np.append(found.frozen.min_dl[: self.frozen], found.tail_min_dl)
            bounds[i] = weight * saturation(max_tf, min_dl, self.avgdl)
        self.bounds = bounds
        self.segment_bound = bounds.sum(axis=0)
        #: Per ordinal: whether a term scored in full holds it.
        self.held = np.zeros(len(self.doclen), dtype=bool)

    def run(self, k: int, ok: Callable[[np.ndarray], np.ndarray], seqs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The ordinals of the top ``k`` docs ``ok`` (of ordinals) allows and their scores, best first, ties by
        seq."""
        self._bound()
        order = np.argsort(-self.segment_bound, kind="stable")
        done = np.zeros(len(order), dtype=bool)
        threshold, batch = -math.inf, FIRST_BATCH
        kept_ords: list[np.ndarray] = []
        kept_scores: list[np.ndarray] = []
        best = np.zeros(0)
        while True:
            open_ = order[~done[order] & (self.segment_bound[order] * (1 + _SLACK) + _FLOOR >= threshold)]
            if not len(open_):
                break
            chosen = open_[:batch]
            done[chosen] = True
            batch *= GROWTH
            ords, scores = self._score(chosen, threshold)
            keep = (scores > 0.0) & ok(ords)
            kept_ords.append(ords[keep])
            kept_scores.append(scores[keep])
            best = np.concatenate([best, scores[keep]])
            if len(best) >= k:
                threshold = float(np.partition(best, len(best) - k)[len(best) - k])
                best = best[best >= threshold]  # the k-th score only rises: the rest never count again
        if not kept_ords:
            return np.zeros(0, dtype=np.int64), np.zeros(0)
        ords, scores = np.concatenate(kept_ords), np.concatenate(kept_scores)
        top = np.lexsort((seqs[ords], -scores))[:k]
        return ords[top], scores[top]

    def among(self, docs: np.ndarray, k: int, seqs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The top ``k`` of ``docs`` (sorted ordinals) and their scores, every term looked up at each: for a
        filter that passes few docs. The same sums in the same order as ``run``'s."""
        scores = np.zeros(len(docs))
        for i, found in enumerate(self.terms):
            ords, tfs = _at(found, docs)
            self.scored += len(ords)
            norm = K1 * (1.0 - B + B * self.doclen[ords] / self.avgdl)
            scores[np.searchsorted(docs, ords)] += self.weights[i] * ((tfs * (K1 + 1.0)) / (tfs + norm))
        hit = np.flatnonzero(scores > 0.0)
        top = hit[np.lexsort((seqs[docs[hit]], -scores[hit]))[:k]]
        return docs[top], scores[top]

    def _score(self, chosen: np.ndarray, threshold: float) -> tuple[np.ndarray, np.ndarray]:
        """The docs of the chosen segments that a term strong enough there holds, scored by every term.  Terms
        are added in the query's order, FTS5's, for every doc alike: docs equal in exact arithmetic stay equal
        to the bit, so their ties fall by seq as FTS5's do."""
        bound = self.bounds[:, chosen].max(axis=1)
        by_bound = np.argsort(bound, kind="stable")
        weak = set(by_bound[np.cumsum(bound[by_bound]) * (1 + _SLACK) + _FLOOR < threshold].tolist())
        frozen = chosen[chosen < self.frozen]
        with_tail = len(frozen) < len(chosen)
        gathered: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        for i, found in enumerate(self.terms):
            if i not in weak:
                at = _runs(self.starts[i][frozen], self.starts[i][frozen + 1])
                ords, tfs = found.frozen.ords[at], found.frozen.tfs[at]
                if with_tail and len(found.tail_ords):
                    ords, tfs = np.concatenate([ords, found.tail_ords]), np.concatenate([tfs, found.tail_tfs])
                gathered[i] = ords, tfs
        if not gathered:
            return _NONE, np.zeros(0)
        # the docs held: marked in a scratch row, read back over the chosen segments' ordinals (no sort)
        for ords, _ in gathered.values():
            self.held[ords] = True
        lows = chosen * SEGMENT
        span = _runs(lows, np.minimum(lows + SEGMENT, len(self.doclen)))
        docs = span[self.held[span]]
        scores = self.scores  # each doc is in one segment, so it is summed in one batch, from 0
        for i, found in enumerate(self.terms):
            ords, tfs = gathered[i] if i in gathered else _at(found, docs)
            self.scored += len(ords)
            norm = K1 * (1.0 - B + B * self.doclen[ords] / self.avgdl)
            scores[ords] += self.weights[i] * ((tfs * (K1 + 1.0)) / (tfs + norm))
        return docs, scores[docs]


def _at(found: Postings, docs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The term's postings among ``docs`` (ordinals): a binary search each, in the frozen list and the tail."""
    ords, tfs = [], []
    for held, freq in ((found.frozen.ords, found.frozen.tfs), (found.tail_ords, found.tail_tfs)):
        if not len(held):
            continue
        at = np.minimum(np.searchsorted(held, docs), len(held) - 1)
        hit = held[at] == docs
        ords.append(docs[hit])
        tfs.append(freq[at[hit]])
    if not ords:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    return np.concatenate(ords), np.concatenate(tfs)
