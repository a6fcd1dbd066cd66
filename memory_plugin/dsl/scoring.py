"""Documents as an index sees them, and BM25 as OpenSearch 2.x scores them.

OpenSearch 2.x's default similarity is ``LegacyBM25Similarity``: Lucene's BM25
(k1 1.2, b 0.75, idf ``log(1 + (N - n + 0.5) / (n + 0.5))``) with the term
weight multiplied by ``k1 + 1``.  Document lengths go through Lucene's one-byte
norm (``SmallFloat.intToByte4``), so long fields score with a rounded length,
as there.  ``keyword`` fields have no norms: their length is 1 and their
average is the mean number of values per document.

Statistics come from the documents the search runs over (the caller's own:
``execute``'s candidates).  The real node counts every caller's documents in a
shard, and superseded versions of updated documents until segments merge, so
scores agree exactly only where those are the same.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from memory_plugin.dsl.analysis import analyze
from memory_plugin.dsl.mapping import FLAT_OBJECT, KEYWORD, TEXT
from memory_plugin.dsl.values import field_values

K1 = 1.2
B = 0.75
#: Positions between two values of one multi-valued text field (``position_increment_gap``).
POSITION_GAP = 100


def _long_to_int4(i: int) -> int:
    bits = i.bit_length()
    if bits < 4:
        return i
    shift = bits - 4
    return ((i >> shift) & 0x07) | ((shift + 1) << 3)


def _int4_to_long(i: int) -> int:
    bits = i & 0x07
    shift = (i >> 3) - 1
    return bits if shift == -1 else (bits | 0x08) << shift


_FREE_VALUES = 255 - _long_to_int4(2**31 - 1)


def norm_length(length: int) -> int:
    """``length`` as Lucene stores and decodes it: exact below 24, then four significant bits."""
    if length < _FREE_VALUES:
        return length
    return _FREE_VALUES + _int4_to_long(_long_to_int4(length - _FREE_VALUES))


@dataclass
class Terms:
    """One field of one document: its terms in position order (with gaps between values)."""

    tokens: list[str]
    positions: list[int]
    counts: Counter[str]


EMPTY = Terms([], [], Counter())


@dataclass(eq=False)
class Doc:
    id: str
    source: Mapping[str, Any]
    pos: int
    version: int | None = None
    _terms: dict[tuple[str, str], Terms] = field(default_factory=dict, repr=False)

    def terms(self, path: str, kind: str) -> Terms:
        key = (path, kind)
        found = self._terms.get(key)
        if found is None:
            found = self._terms[key] = index_terms(field_values(self.source, path), kind)
        return found


def as_keyword(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def index_terms(values: Sequence[Any], kind: str) -> Terms:
    if not values:
        return EMPTY
    tokens: list[str] = []
    positions: list[int] = []
    if kind == TEXT:
        start = 0
        for value in values:
            words = analyze(as_keyword(value))
            tokens.extend(words)
            positions.extend(range(start, start + len(words)))
            start += len(words) + POSITION_GAP
    else:
        tokens = [as_keyword(v) for v in values if not isinstance(v, Mapping)]
        positions = list(range(len(tokens)))
    return Terms(tokens, positions, Counter(tokens))


@dataclass
class FieldStats:
    docs_with_field: int
    average_length: float
    doc_freq: Counter[str]
    #: Every token of the field in every document (Lucene's ``sumTotalTermFreq``).
    total_length: int = 0


class OutOfTime(Exception):
    """The search's budget ran out while statistics were being gathered."""


class Corpus:
    """The documents of one search, with per-field statistics computed on first use.

    Gathering statistics reads every document, so it checks the search's
    ``deadline`` (a ``time.monotonic`` instant) as it goes.
    """

    def __init__(self, docs: Sequence[Doc], deadline: float | None = None) -> None:
        self.docs = docs
        self.deadline = deadline
        self._stats: dict[tuple[str, str], FieldStats] = {}
        #: What a clause works out once per search (a fuzzy query's expansions), by the clause's id or value.
        self.memo: dict[Hashable, object] = {}

    def check_time(self) -> None:
        """Raise :class:`OutOfTime` once past the deadline (for work done once per search, such as expansions)."""
        if self.deadline is not None and time.monotonic() >= self.deadline:
            raise OutOfTime

    def stats(self, path: str, kind: str) -> FieldStats:
        key = (path, kind)
        found = self._stats.get(key)
        if found is None:
            n = 0
            total = 0
            df: Counter[str] = Counter()
            for i, doc in enumerate(self.docs):
                if self.deadline is not None and i % 256 == 255 and time.monotonic() >= self.deadline:
                    raise OutOfTime
                terms = doc.terms(path, kind)
                if terms.tokens:
                    n += 1
                    distinct = terms.counts.keys()
                    total += len(terms.tokens) if kind == TEXT else len(distinct)
                    df.update(distinct)
            found = self._stats[key] = FieldStats(n, total / n if n else 1.0, df, total)
        return found

    def vocabulary(self, path: str, kind: str) -> list[str]:
        return sorted(self.stats(path, kind).doc_freq)


def idf(stats: FieldStats, doc_freq: int) -> float:
    return math.log(1 + (stats.docs_with_field - doc_freq + 0.5) / (doc_freq + 0.5))


def bm25(freq: float, length: int, kind: str, stats: FieldStats, term_idf: float, boost: float) -> float:
    """One term's (or phrase's) score in one document."""
    dl = norm_length(length) if kind == TEXT else 1
    tf = freq / (freq + K1 * (1 - B + B * dl / stats.average_length))
    return boost * (K1 + 1) * term_idf * tf


def term_score(doc: Doc, corpus: Corpus, path: str, kind: str, term: str, boost: float) -> float | None:
    terms = doc.terms(path, kind)
    freq = terms.counts.get(term, 0)
    if not freq:
        return None
    if kind not in (TEXT, KEYWORD, FLAT_OBJECT):
        return boost
    if kind != TEXT:
        freq = 1  # keyword fields index documents only, no frequencies
    stats = corpus.stats(path, kind)
    return bm25(freq, len(terms.tokens), kind, stats, idf(stats, stats.doc_freq[term]), boost)
