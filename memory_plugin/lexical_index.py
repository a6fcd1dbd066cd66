"""The server's embedded lexical engine: BM25 over FTS5's tokens, top-k without scoring every match, in memory.

An FTS5 table stays the source of truth; this is a mirror of its postings, built from the table at open
(``bulk``, from ``fts5vocab``) and kept in step with each committed write (``apply``).  Two features use it:
agentic long-term memory (``lt_fts``, FTS5's own ``bm25()``) and conversation histories (``chunk_words``,
Lucene's BM25).  Scores are FTS5's ``bm25()`` to the last bits by default: k1 = 1.2, b = 0.75,
idf = log((N - n + 0.5) / (n + 0.5)) floored at 1e-6; with ``idf="lucene"``, Lucene's:
log(1 + (N - n + 0.5) / (n + 0.5)) and no (k1 + 1) factor.  N, n and the average length span the whole table
(every container, as FTS5 counts them, as a shard's span its index), and a quoted query word that is one token
weighs once per occurrence in the query.  The tokens are FTS5's own (``Fts5Tokenizer`` and the table's
``fts5vocab``), so no second tokenizer has to agree with the table's.

Each container's docs get ordinals in the order they arrive; postings are frozen in segments of
``SEGMENT`` consecutive ordinals, each term's with its largest frequency and shortest doc there.  A search
bounds every segment's best score from those two numbers (valid whatever the average length is now), scores
segments best bound first, and stops once no segment left can reach the k-th score: block-max MaxScore at
segment granularity, each segment scored with numpy (``lexical_search``); a filter passing few docs has them
scored directly, and a query whose words hold fewer postings than ``EVERY_POSTINGS`` has them all scored.  Deleted or replaced docs stay as dead ordinals until their container is compacted.

Changed on one thread at a time (``apply``), after the write committed; searched from a snapshot: arrays are
replaced, never shrunk, and rows below a snapshot's ``n`` never change.  A search gathers term lists in its
shard (``Shard.term_lists``): searches of one index run one at a time.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from memory_plugin.lexical_search import (
    EVERY_POSTINGS,
    SEGMENT,
    Postings,
    TermList,
    TopK,
    fts5_weight,
    lucene_weight,
)
from memory_plugin.sorted_ids import runs

__all__ = ["SEGMENT", "Change", "LexicalIndex", "Segment", "Shard", "TermList", "bulk", "Fts5Tokenizer"]


@dataclass
class Change:
    """A committed change of one FTS5 row: its tokens now (None: gone), and whose doc it is."""

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
        distinct, starts = runs(terms)
        bounds = np.append(starts, len(terms)).astype(np.int64)
        if len(terms):
            max_tf = np.maximum.reduceat(tfs, starts)
            min_dl = np.minimum.reduceat(doclen[ords], starts)
        else:
            max_tf = min_dl = np.zeros(0)
        return Segment(low, distinct, bounds, ords, tfs, terms, max_tf.astype(np.float64), min_dl.astype(np.float64))


#: A filter passing at most this many docs has them scored directly (a binary search per term and doc), not
#: the segments: at 100,000 docs a 1% filter's top 100 read most of the segments before k docs passed.
FEW_ALLOWED = 4 * SEGMENT
#: Postings a shard keeps gathered by term for searches before it starts afresh.
GATHERED = 8_000_000


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
    #: Searched terms' postings gathered over the frozen segments (the reader thread's own).
    gathered: dict[int, TermList] = field(default_factory=dict)
    gathered_size: int = 0

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
            distinct, starts = runs(ords)
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

    def view(self) -> tuple[tuple[Segment, ...], Segment | None, int]:
        """The frozen segments, the pending docs frozen as one more (cached while they do not change), and the
        number of ordinals they cover."""
        segments, pending = self.state
        count = len(pending)
        low = len(segments) * SEGMENT
        if not count:
            return segments, None, low
        cached = self.pending_view
        if cached is None or cached[0] != count or cached[1].low != low:
            cached = (count, self._freeze(pending[:count], low))
            self.pending_view = cached
        return segments, cached[1], low + count

    def term_lists(self, terms: list[int], segments: tuple[Segment, ...]) -> list[TermList]:
        """Each term's postings over ``segments``, gathered once and extended as segments freeze."""
        if self.gathered_size > GATHERED:
            self.gathered, self.gathered_size = {}, 0
        covered = {t: len(self.gathered[t].max_tf) if t in self.gathered else 0 for t in terms}
        stale = [t for t in terms if t not in self.gathered or covered[t] != len(segments)]
        if stale:
            wanted = np.asarray(stale, dtype=np.int64)
            slices: dict[int, list[tuple[int, int]]] = {t: [] for t in stale}  # (segment, term position)
            for index in range(min(covered[t] for t in stale), len(segments)):
                segment = segments[index]
                if not len(segment.terms):
                    continue
                at = np.minimum(np.searchsorted(segment.terms, wanted), len(segment.terms) - 1)
                hit = segment.terms[at] == wanted
                for term, position, present in zip(stale, at.tolist(), hit.tolist()):
                    if present and index >= covered[term]:
                        slices[term].append((index, position))
            for term in stale:
                self.gathered[term] = self._gather(self.gathered.get(term), term, slices[term], segments)
        return [self.gathered[t] for t in terms]

    def _gather(
        self, old: TermList | None, term: int, slices: list[tuple[int, int]], segments: tuple[Segment, ...]
    ) -> TermList:
        covered = 0 if old is None else len(old.max_tf)
        max_tf, min_dl = np.zeros(len(segments) - covered), np.ones(len(segments) - covered)
        ords, tfs = [] if old is None else [old.ords], [] if old is None else [old.tfs]
        for index, position in slices:
            segment = segments[index]
            start, end = segment.starts[position], segment.starts[position + 1]
            ords.append(segment.ords[start:end])
            tfs.append(segment.tfs[start:end])
            max_tf[index - covered], min_dl[index - covered] = segment.max_tf[position], segment.min_dl[position]
            self.gathered_size += end - start
        return TermList(
            term,
            np.concatenate(ords) if ords else np.zeros(0, dtype=np.int64),
            np.concatenate(tfs) if tfs else np.zeros(0),
            max_tf if old is None else np.concatenate([old.max_tf, max_tf]),
            min_dl if old is None else np.concatenate([old.min_dl, min_dl]),
        )


class LexicalIndex:
    """Global FTS5 statistics and each container's shard."""

    def __init__(self, idf: Literal["fts5", "lucene"] = "fts5") -> None:
        self.weight = lucene_weight if idf == "lucene" else fts5_weight
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
        #: The mark of the last committed ``lt_fts`` change this mirror holds (``fts.drain``): a saved mirror
        #: is SQLite's only while SQLite's mark is the same (``bm25_files``).
        self.mark = 0

    def _term_ids(self, tokens: Iterable[str]) -> np.ndarray:
        ids = [self.vocabulary.setdefault(token, len(self.vocabulary)) for token in tokens]
        if len(self.vocabulary) > len(self.df):
            self.df = _grown(self.df, len(self.vocabulary))
        return np.asarray(ids, dtype=np.int64)

    def apply(self, changes: Iterable[Change], mark: int | None = None) -> None:
        """Committed changes, in commit order, up to ``mark``; then containers left mostly dead are compacted."""
        touched: set[str] = set()
        for change in changes:
            removed = self._remove(change.seq)
            if removed is not None:
                touched.add(removed)
            if change.tokens is not None:
                self._add(change)
        for container_id in touched:
            self._compact(container_id)
        if mark is not None:
            self.mark = mark

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
        for word in words:
            term = self.vocabulary.get(word)
            if term is not None:
                weights[term] = weights.get(term, 0.0) + self.weight(rows, int(self.df[term]))
        if not weights:
            return []
        segments, tail, n = shard.view()
        live, owners, seqs = shard.live, shard.owner_of, shard.seq_of
        lists = [_postings(found, tail) for found in shard.term_lists(list(weights), segments)]
        search = TopK(lists, list(weights.values()), shard.doclen[:n], tokens / rows, len(segments))

        if allowed is not None and len(allowed) <= FEW_ALLOWED:  # the docs a filter passes, each looked up
            places = (self.where.get(seq, (None, None)) for seq in allowed.tolist())
            held = np.asarray(sorted(at for c, at in places if c == container_id and isinstance(at, int)), np.int64)
            held = held[held < n]
            top, scores = search.among(held[live[held] & (owners[held] == owner_id)], k, seqs)
            self.scored = search.scored
            return list(zip(seqs[top].tolist(), scores.tolist()))
        # a table lookup once: 0.3 ms at 100k docs, where one per batch sorted both sides each time
        passes = None if allowed is None else np.isin(seqs[:n], allowed, kind="table")

        def ok(ords: np.ndarray) -> np.ndarray:
            passing: np.ndarray = live[ords] & (owners[ords] == owner_id)
            if passes is not None:
                passing &= passes[ords]
            return passing

        top, scores = (search.every if search.postings() <= EVERY_POSTINGS else search.run)(k, ok, seqs)
        self.scored = search.scored
        return list(zip(seqs[top].tolist(), scores.tolist()))


_NO_ORDS, _NO_TFS = np.zeros(0, dtype=np.int64), np.zeros(0)


def _postings(found: TermList, tail: Segment | None) -> Postings:
    """A term's list with its postings among the not yet frozen docs (``tail``, frozen as one more segment)."""
    if tail is not None:
        at = int(np.searchsorted(tail.terms, found.term))
        if at < len(tail.terms) and tail.terms[at] == found.term:
            start, end = tail.starts[at], tail.starts[at + 1]
            return Postings(
                found, tail.ords[start:end], tail.tfs[start:end], float(tail.max_tf[at]), float(tail.min_dl[at])
            )
    return Postings(found, _NO_ORDS, _NO_TFS)


def bulk(
    c: sqlite3.Connection,
    table: str,
    members: Iterable[tuple[int, str, tuple[str, str]]],
    idf: Literal["fts5", "lucene"] = "fts5",
) -> LexicalIndex:
    """The mirror of FTS5 table ``table`` as ``c`` reads it now (call inside a read transaction), from its own
    postings; ``members`` are ``(rowid, container, owner)`` of the rows some container holds, in rowid order.
    Rows no member names are counted in the statistics, as FTS5 counts them, and found by no search."""
    c.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.{table}_vocab USING fts5vocab(main, {table}, instance)")
    grouped = c.execute(f"SELECT term, group_concat(doc) FROM temp.{table}_vocab GROUP BY term").fetchall()
    (rowids,) = c.execute(f"SELECT group_concat(rowid) FROM {table}").fetchone()
    index = LexicalIndex(idf)
    words = [row[0] for row in grouped]
    index.vocabulary = {word: n for n, word in enumerate(words)}
    counts = np.asarray([row[1].count(",") + 1 for row in grouped], dtype=np.int64)
    docs = np.fromstring(",".join(row[1] for row in grouped), dtype=np.int64, sep=",") if grouped else np.zeros(0)
    docs = docs.astype(np.int64)
    terms = np.repeat(np.arange(len(words), dtype=np.int64), counts)
    order = np.lexsort((terms, docs))
    docs, terms = docs[order], terms[order]
    first = np.ones(len(docs), dtype=bool)
    first[1:] = (docs[1:] != docs[:-1]) | (terms[1:] != terms[:-1])
    starts = np.flatnonzero(first)
    pair_docs, pair_terms = docs[starts], terms[starts]
    pair_tfs = np.diff(np.append(starts, len(docs))).astype(np.float64)
    index.df = np.bincount(pair_terms, minlength=max(len(words), 1)).astype(np.int64)
    all_rows = np.unique(np.fromstring(rowids or "", dtype=np.int64, sep=","))
    index.rows, index.tokens = len(all_rows), len(docs)
    token_docs, token_starts = runs(docs)  # docs are sorted: each doc's run of tokens is its length
    length_of = dict(zip(token_docs.tolist(), np.diff(np.append(token_starts, len(docs))).tolist()))
    # each doc's (term, tf) pairs: a slice of the pair arrays, which are doc-major
    doc_ids, doc_starts = runs(pair_docs)
    doc_ends = np.append(doc_starts[1:], len(pair_docs))
    span = {int(d): (int(a), int(b)) for d, a, b in zip(doc_ids.tolist(), doc_starts.tolist(), doc_ends.tolist())}
    by_container: dict[str, list[tuple[int, int]]] = {}
    owned: set[int] = set()
    live_rows = set(all_rows.tolist())
    for seq, container_id, owner in members:
        if seq in live_rows:
            code = index.owners.setdefault(owner, len(index.owners))
            by_container.setdefault(container_id, []).append((seq, code))
            owned.add(seq)
    for container_id, held in by_container.items():
        index.shards[container_id] = _bulk_shard(held, span, length_of, pair_terms, pair_tfs)
        index.where.update((seq, (container_id, n)) for n, (seq, _) in enumerate(held))
    for seq in live_rows - owned:  # a row no member names: counted, found by nobody
        a, b = span.get(seq, (0, 0))
        index.where[seq] = (None, (pair_terms[a:b], pair_tfs[a:b], int(length_of.get(seq, 0))))
    return index


def _bulk_shard(
    members: list[tuple[int, int]],
    span: dict[int, tuple[int, int]],
    length_of: dict[int, int],
    pair_terms: np.ndarray,
    pair_tfs: np.ndarray,
) -> Shard:
    """A container's shard from its (seq, owner) in seq order: whole segments frozen at once."""
    shard = Shard()
    count = len(members)
    shard.seq_of = np.asarray([seq for seq, _ in members], dtype=np.int64)
    shard.owner_of = np.asarray([owner for _, owner in members], dtype=np.int32)
    shard.doclen = np.asarray([length_of.get(seq, 0) for seq, _ in members], dtype=np.float64)
    shard.live = np.ones(count, dtype=bool)
    shard.n = count
    whole = count // SEGMENT * SEGMENT
    segments: list[Segment] = []
    for low in range(0, whole, SEGMENT):
        slices = [span.get(seq, (0, 0)) for seq, _ in members[low : low + SEGMENT]]
        picks = np.concatenate([np.arange(a, b) for a, b in slices]).astype(np.int64)
        ords = np.repeat(np.arange(low, low + SEGMENT, dtype=np.int64), [b - a for a, b in slices])
        segments.append(Segment.build(low, ords, pair_terms[picks], pair_tfs[picks], shard.doclen))
    pending = []
    for seq, _ in members[whole:]:
        a, b = span.get(seq, (0, 0))
        pending.append((pair_terms[a:b], pair_tfs[a:b]))
    shard.state = (tuple(segments), pending)
    return shard


class Fts5Tokenizer:
    """FTS5's tokens for texts under a ``tokenize`` option, from a private in-memory FTS5 table (any thread; one
    at a time): the mirror's tokens are the table's own.  The table is contentless and emptied whole after each
    call (``delete-all``): a row deleted from an ordinary one stays in its index as a tombstone, which every
    later read of ``fts5vocab`` walks again (a query's six words took milliseconds after a few thousand writes).
    Each word's tokens are also kept (``word_tokens``): questions repeat their words.  The table is made at the
    first call: a store that is opened and never searched by words (most, in tests and tools) pays nothing."""

    #: Words whose tokens are kept; the dict starts afresh beyond this many.
    WORDS = 65_536

    def __init__(self, tokenize: str) -> None:
        self.tokenize = tokenize
        self._lock = threading.Lock()
        self._c: sqlite3.Connection | None = None
        self._words: dict[str, list[str]] = {}

    def _scratch(self) -> sqlite3.Connection:
        if self._c is None:
            c = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
            c.execute(f"CREATE VIRTUAL TABLE scratch USING fts5 (memory, content = '', tokenize = '{self.tokenize}')")
            c.execute("CREATE VIRTUAL TABLE scratch_vocab USING fts5vocab(scratch, instance)")
            self._c = c
        return self._c

    def tokens(self, texts: Sequence[str]) -> list[list[str]]:
        out: list[list[tuple[int, str]]] = [[] for _ in texts]
        with self._lock:
            c = self._scratch()
            c.executemany("INSERT INTO scratch (rowid, memory) VALUES (?, ?)", list(enumerate(texts)))
            rows = c.execute("SELECT doc, offset, term FROM scratch_vocab").fetchall()
            c.execute("INSERT INTO scratch (scratch) VALUES ('delete-all')")
        for doc, offset, term in rows:
            out[doc].append((offset, term))
        return [[term for _, term in sorted(doc)] for doc in out]

    def word_tokens(self, words: Sequence[str]) -> list[list[str]]:
        """``tokens`` of each word, each word asked of FTS5 once."""
        known = self._words
        asked = [word for word in dict.fromkeys(words) if word not in known]
        if asked:
            if len(known) + len(asked) > self.WORDS:
                known = self._words = {}
            known.update(zip(asked, self.tokens(asked)))
        return [known[word] for word in words]

    def close(self) -> None:
        with self._lock:
            if self._c is not None:
                self._c.close()
