"""FTS5's BM25 over ``lt_fts``, top-k without scoring every match: an in-memory mirror of the table's postings.

Scores are FTS5's ``bm25()`` to the last bits: k1 = 1.2, b = 0.75, idf = log((N - n + 0.5) / (n + 0.5)) floored
at 1e-6, with N, n and the average length over the whole table (every container, as FTS5 counts them), and a
quoted query word that is one token weighing once per occurrence in the query.  The tokens are FTS5's own
(``fts.Tokenizer`` and the table's ``fts5vocab``), so no second tokenizer has to agree with unicode61.

Each container's docs get ordinals in the order they arrive; postings are frozen in segments of
``SEGMENT`` consecutive ordinals, each term's with its largest frequency and shortest doc there.  A search
bounds every segment's best score from those two numbers (valid whatever the average length is now), scores
segments best bound first, and stops once no segment left can reach the k-th score: block-max MaxScore at
segment granularity, each segment scored with numpy.  Deleted or replaced docs stay as dead ordinals until
their container is compacted.

Changed on the event loop only (``apply``), after the write committed; searched on the reader thread from a
snapshot: arrays are replaced, never shrunk, and rows below a snapshot's ``n`` never change.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

K1, B = 1.2, 0.75
#: Docs per frozen segment: the unit that is bounded, skipped or scored.
SEGMENT = 1024


@dataclass
class Change:
    """A committed change of one ``lt_fts`` row: its tokens now (None: gone), and whose doc it is."""

    seq: int
    tokens: list[str] | None
    container_id: str | None = None
    owner: tuple[str, str] | None = None


@dataclass(frozen=True)
class Segment:
    """Postings of ordinals ``[low, low + SEGMENT)`` of one container, grouped by term (CSR)."""

    low: int
    terms: np.ndarray  # sorted distinct term ids
    starts: np.ndarray  # len(terms) + 1 offsets into ords/tfs
    ords: np.ndarray  # doc ordinal per posting, ascending within a term
    tfs: np.ndarray  # term frequency per posting
    post_terms: np.ndarray  # term id per posting (a doc's terms when it is deleted)
    max_tf: np.ndarray  # per term: its largest frequency here
    min_dl: np.ndarray  # per term: the shortest doc here holding it

    @staticmethod
    def build(low: int, ords: np.ndarray, terms: np.ndarray, tfs: np.ndarray, doclen: np.ndarray) -> Segment:
        order = np.lexsort((ords, terms))
        ords, terms, tfs = ords[order], terms[order], tfs[order]
        distinct, starts = np.unique(terms, return_index=True)
        bounds = np.append(starts, len(terms)).astype(np.int64)
        if len(terms):
            max_tf = np.maximum.reduceat(tfs, starts)
            min_dl = np.minimum.reduceat(doclen[ords], starts)
        else:
            max_tf = min_dl = np.zeros(0)
        return Segment(low, distinct, bounds, ords, tfs, terms, max_tf.astype(np.float64), min_dl.astype(np.float64))


def _grown(array: np.ndarray, size: int) -> np.ndarray:
    if size <= len(array):
        return array
    grown = np.zeros(max(size, 2 * len(array), 256), dtype=array.dtype)
    grown[: len(array)] = array
    return grown


@dataclass
class Shard:
    """One container's docs: per ordinal its seq, length, owner and liveness; postings in segments."""

    seq_of: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    doclen: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.float64))
    owner_of: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int32))
    live: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    n: int = 0
    dead: int = 0
    #: The frozen segments and the docs after them (term ids, tfs each), replaced together when a segment
    #: freezes so that a search reads both at one moment; the list only grows in place.
    state: tuple[tuple[Segment, ...], list[tuple[np.ndarray, np.ndarray]]] = field(default_factory=lambda: ((), []))
    #: A frozen view of the pending docs as the last search saw them: (their count, the segment).
    pending_view: tuple[int, Segment] | None = None

    def append(self, seq: int, owner: int, terms: np.ndarray, tfs: np.ndarray, length: int) -> int:
        ordinal = self.n
        size = ordinal + 1
        if size > len(self.seq_of):
            self.seq_of, self.doclen = _grown(self.seq_of, size), _grown(self.doclen, size)
            self.owner_of, self.live = _grown(self.owner_of, size), _grown(self.live, size)
        self.seq_of[ordinal], self.doclen[ordinal], self.owner_of[ordinal] = seq, length, owner
        self.live[ordinal] = True
        self.n = size
        segments, pending = self.state
        pending.append((terms, tfs))
        if len(pending) == SEGMENT:
            self.state = ((*segments, self._freeze(pending, size - SEGMENT)), [])
        return ordinal

    def doc_terms(self, ordinal: int) -> tuple[np.ndarray, np.ndarray]:
        segments, pending = self.state
        index = ordinal // SEGMENT
        if index < len(segments):
            segment = segments[index]
            mine = segment.ords == ordinal
            return segment.post_terms[mine], segment.tfs[mine]
        return pending[ordinal - len(segments) * SEGMENT]

    def live_docs(self) -> list[tuple[int, np.ndarray, np.ndarray]]:
        """(ordinal, term ids, tfs) of every live doc, in order (for compaction)."""
        segments, pending = self.state
        out: list[tuple[int, np.ndarray, np.ndarray]] = []
        for segment in segments:
            keep = self.live[segment.ords]
            ords, terms, tfs = segment.ords[keep], segment.post_terms[keep], segment.tfs[keep]
            order = np.argsort(ords, kind="stable")
            ords, terms, tfs = ords[order], terms[order], tfs[order]
            distinct, starts = np.unique(ords, return_index=True)
            ends = np.append(starts[1:], len(ords))
            out += [(int(o), terms[a:b], tfs[a:b]) for o, a, b in zip(distinct.tolist(), starts, ends)]
        low = len(segments) * SEGMENT
        out += [(low + i, t, f) for i, (t, f) in enumerate(pending) if self.live[low + i]]
        return out

    def _freeze(self, docs: Sequence[tuple[np.ndarray, np.ndarray]], low: int) -> Segment:
        counts = [len(terms) for terms, _ in docs]
        ords = np.repeat(np.arange(low, low + len(docs), dtype=np.int64), counts)
        terms = np.concatenate([t for t, _ in docs]).astype(np.int64)
        tfs = np.concatenate([f for _, f in docs]).astype(np.float64)
        return Segment.build(low, ords, terms, tfs, self.doclen)

    def view(self) -> tuple[list[Segment], int]:
        """Every segment, the pending docs frozen as one more (cached while they do not change), and the
        number of ordinals they cover."""
        segments, pending = self.state
        count = len(pending)
        low = len(segments) * SEGMENT
        if not count:
            return list(segments), low
        cached = self.pending_view
        if cached is None or cached[0] != count or cached[1].low != low:
            cached = (count, self._freeze(pending[:count], low))
            self.pending_view = cached
        return [*segments, cached[1]], low + count


class LexicalIndex:
    """Global FTS5 statistics and each container's shard."""

    def __init__(self) -> None:
        self.vocabulary: dict[str, int] = {}
        self.df = np.zeros(1024, dtype=np.int64)
        self.rows = 0
        self.tokens = 0
        self.shards: dict[str, Shard] = {}
        self.owners: dict[tuple[str, str], int] = {}
        #: seq -> (container or None for a row no memory owns, ordinal or its (terms, tfs, length)).
        self.where: dict[int, tuple[str | None, int | tuple[np.ndarray, np.ndarray, int]]] = {}
        #: Postings scored by the last search (a test hook: early termination skips).
        self.scored = 0

    def _term_ids(self, tokens: Iterable[str]) -> np.ndarray:
        ids = [self.vocabulary.setdefault(token, len(self.vocabulary)) for token in tokens]
        if len(self.vocabulary) > len(self.df):
            self.df = _grown(self.df, len(self.vocabulary))
        return np.asarray(ids, dtype=np.int64)

    def apply(self, changes: Iterable[Change]) -> None:
        """Committed changes, in commit order; then containers left mostly dead are compacted."""
        touched: set[str] = set()
        for change in changes:
            removed = self._remove(change.seq)
            if removed is not None:
                touched.add(removed)
            if change.tokens is not None:
                self._add(change)
        for container_id in touched:
            self._compact(container_id)

    def _remove(self, seq: int) -> str | None:
        found = self.where.pop(seq, None)
        if found is None:
            return None
        container_id, place = found
        if isinstance(place, tuple):
            terms, _, length = place
        else:
            assert container_id is not None
            shard = self.shards[container_id]
            terms, _ = shard.doc_terms(place)
            length = int(shard.doclen[place])
            shard.live[place] = False
            shard.dead += 1
        self.df[terms] -= 1
        self.rows -= 1
        self.tokens -= length
        return container_id

    def _add(self, change: Change) -> None:
        assert change.tokens is not None
        ids = self._term_ids(change.tokens)
        terms, tfs = np.unique(ids, return_counts=True)
        self.df[terms] += 1
        self.rows += 1
        self.tokens += len(ids)
        if change.container_id is None or change.owner is None:
            self.where[change.seq] = (None, (terms, tfs.astype(np.float64), len(ids)))
            return
        shard = self.shards.setdefault(change.container_id, Shard())
        owner = self.owners.setdefault(change.owner, len(self.owners))
        ordinal = shard.append(change.seq, owner, terms, tfs.astype(np.float64), len(ids))
        self.where[change.seq] = (change.container_id, ordinal)

    def _compact(self, container_id: str) -> None:
        """A container with more dead ordinals than live ones is rebuilt from its live docs (or dropped)."""
        shard = self.shards.get(container_id)
        if shard is None or shard.dead * 2 <= shard.n or shard.n < SEGMENT and shard.dead < shard.n:
            return
        fresh = Shard()
        for ordinal, terms, tfs in shard.live_docs():
            seq = int(shard.seq_of[ordinal])
            owner, length = int(shard.owner_of[ordinal]), int(shard.doclen[ordinal])
            self.where[seq] = (container_id, fresh.append(seq, owner, terms, tfs, length))
        if fresh.n:
            self.shards[container_id] = fresh
        else:
            del self.shards[container_id]

    def search(
        self,
        container_id: str,
        owner: tuple[str, str],
        words: Sequence[str],
        k: int,
        allowed: np.ndarray | None = None,
    ) -> list[tuple[int, float]]:
        """Top ``k`` ``(seq, score)`` of the owner's docs in the container (and among the sorted ``allowed``
        seqs), ``words`` being the query's one-token phrases; ties by seq, as FTS5 orders its rank."""
        self.scored = 0
        shard = self.shards.get(container_id)
        owner_id = self.owners.get(owner)
        rows, tokens = self.rows, self.tokens
        if shard is None or owner_id is None or rows == 0:
            return []
        weights: dict[int, float] = {}
        avgdl = tokens / rows
        for word in words:
            term = self.vocabulary.get(word)
            if term is None:
                continue
            n = int(self.df[term])
            idf = math.log((rows - n + 0.5) / (n + 0.5))
            weights[term] = weights.get(term, 0.0) + (idf if idf > 0.0 else 1e-6)
        if not weights:
            return []
        query = np.fromiter(weights, dtype=np.int64)
        weight = np.fromiter(weights.values(), dtype=np.float64)
        order = np.argsort(query)
        query, weight = query[order], weight[order]
        parts, n = shard.view()
        live, doclen, owners, seqs = shard.live[:n].copy(), shard.doclen, shard.owner_of, shard.seq_of
        bounds = []
        for segment in parts:
            if not len(segment.terms):
                continue
            at = np.minimum(np.searchsorted(segment.terms, query), len(segment.terms) - 1)
            hit = segment.terms[at] == query
            if not hit.any():
                continue
            tf, dl = segment.max_tf[at[hit]], segment.min_dl[at[hit]]
            best = float(np.sum(weight[hit] * (tf * (K1 + 1.0)) / (tf + K1 * (1.0 - B + B * dl / avgdl))))
            # the bound sums in another order than the scores: a margin far above rounding, far below 1e-6
            bounds.append((best * (1 + 1e-9) + 1e-12, segment, at[hit], weight[hit]))
        bounds.sort(key=lambda item: -item[0])
        top_scores, top_seqs = np.zeros(0), np.zeros(0, dtype=np.int64)
        for best, segment, at, w in bounds:
            if len(top_scores) == k and best < top_scores[-1]:
                break
            span = min(SEGMENT, n - segment.low)
            scores = np.zeros(span)
            for index, term_weight in zip(at.tolist(), w.tolist()):
                start, end = segment.starts[index], segment.starts[index + 1]
                ords, tfs = segment.ords[start:end], segment.tfs[start:end]
                self.scored += len(ords)
                norm = K1 * (1.0 - B + B * doclen[ords] / avgdl)
                scores[ords - segment.low] += term_weight * (tfs * (K1 + 1.0)) / (tfs + norm)
            ords = np.flatnonzero(scores > 0.0) + segment.low
            ords = ords[live[ords] & (owners[ords] == owner_id)]
            found = seqs[ords]
            if allowed is not None:
                at_allowed = np.minimum(np.searchsorted(allowed, found), max(len(allowed) - 1, 0))
                keep = allowed[at_allowed] == found if len(allowed) else np.zeros(len(found), dtype=bool)
                ords, found = ords[keep], found[keep]
            top_scores = np.concatenate([top_scores, scores[ords - segment.low]])
            top_seqs = np.concatenate([top_seqs, found])
            ranked = np.lexsort((top_seqs, -top_scores))[:k]
            top_scores, top_seqs = top_scores[ranked], top_seqs[ranked]
        return [(int(seq), float(score)) for seq, score in zip(top_seqs.tolist(), top_scores.tolist())]
