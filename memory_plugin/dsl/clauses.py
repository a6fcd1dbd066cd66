"""The query clauses: each scores a document (``None`` when it does not match)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from rapidfuzz.distance import OSA, Levenshtein

from memory_plugin.dsl.analysis import analyze
from memory_plugin.dsl.mapping import DYNAMIC, FLAT_OBJECT, KEYWORD, TEXT, UNMAPPED
from memory_plugin.dsl.scoring import Corpus, Doc, Terms, as_keyword, bm25, idf, term_score
from memory_plugin.dsl.values import (
    QueryParsingError,
    as_float,
    epoch_millis,
    field_values,
    is_number,
    parse_date,
    values_equal,
)

# --------------------------------------------------------------------------- clauses


class Clause:
    """A parsed query clause.  ``score`` is ``None`` for a document it does not match."""

    boost: float = 1.0

    def score(self, doc: Doc, corpus: Corpus) -> float | None:  # pragma: no cover
        raise NotImplementedError


@dataclass
class MatchAll(Clause):
    boost: float = 1.0

    def score(self, doc: Doc, corpus: Corpus) -> float | None:
        return self.boost


@dataclass
class MatchNone(Clause):
    def score(self, doc: Doc, corpus: Corpus) -> float | None:
        return None


@dataclass
class TermScore(Clause):
    """One term of one field, scored by BM25 (Lucene's ``TermQuery``)."""

    field: str
    kind: str
    term: str
    boost: float = 1.0

    def score(self, doc: Doc, corpus: Corpus) -> float | None:
        return term_score(doc, corpus, self.field, self.kind, self.term, self.boost)


@dataclass
class Fuzzy(Clause):
    """Terms within an edit distance (Lucene's ``FuzzyQuery``): each scored with the top document frequency.

    Expansions come from the field's terms in the searched documents, at most
    ``max_expansions`` of them, best (fewest edits) first; each is boosted by
    ``1 - edits / min(len)``, as ``FuzzyTermsEnum`` boosts them.
    """

    field: str
    kind: str
    term: str
    max_edits: int
    prefix_length: int = 0
    transpositions: bool = True
    max_expansions: int = 50
    boost: float = 1.0

    def expansions(self, corpus: Corpus) -> list[tuple[str, float]]:
        # by value: a query of a thousand equal words (a long text with fuzziness) expands one of them
        key = (
            self.field,
            self.kind,
            self.term,
            self.max_edits,
            self.prefix_length,
            self.transpositions,
            self.max_expansions,
        )
        cached = corpus.memo.get(key)
        if cached is None:
            corpus.check_time()  # each of many distinct words over a small vocabulary, too
            found: list[tuple[int, str, float]] = []
            prefix = self.term[: self.prefix_length]
            for i, candidate in enumerate(corpus.vocabulary(self.field, self.kind)):
                if i % 256 == 255:
                    corpus.check_time()  # a thousand fuzzy clauses over a big vocabulary add up
                if not candidate.startswith(prefix):
                    continue
                edits = edit_distance(self.term, candidate, self.max_edits, self.transpositions)
                if edits is None:
                    continue
                shortest = min(len(self.term), len(candidate))
                found.append((edits, candidate, 1.0 - edits / shortest if shortest else 0.0))
            found.sort(key=lambda e: (e[0], e[1]))
            cached = corpus.memo[key] = [(term, boost) for _, term, boost in found[: self.max_expansions]]
        return cached  # type: ignore[return-value]

    def score(self, doc: Doc, corpus: Corpus) -> float | None:
        expansions = self.expansions(corpus)
        if not expansions:
            return None
        terms = doc.terms(self.field, self.kind)
        present = [(t, b) for t, b in expansions if t in terms.counts]
        if not present:
            return None
        stats = corpus.stats(self.field, self.kind)
        blended = idf(stats, max(stats.doc_freq[t] for t, _ in expansions))
        total = 0.0
        for term, boost in present:
            freq = terms.counts[term] if self.kind == TEXT else 1
            total += bm25(freq, len(terms.tokens), self.kind, stats, blended, self.boost * boost)
        return total


def edit_distance(a: str, b: str, limit: int, transpositions: bool) -> int | None:
    """Levenshtein (or, as Lucene's fuzzy query by default, optimal-string-alignment) distance of ``a`` and
    ``b`` in code points when at most ``limit``, else None.  RapidFuzz's bit-parallel kernel: a full table in
    Python took 30 ms for two 255-character terms, and a query of hundreds of them held both search threads
    for 40 s; this takes a microsecond."""
    metric = OSA if transpositions else Levenshtein
    distance = metric.distance(a, b, score_cutoff=limit)
    return distance if distance <= limit else None


@dataclass
class Phrase(Clause):
    """Terms at consecutive positions, or within ``slop`` moves (Lucene's ``PhraseQuery``)."""

    field: str
    kind: str
    terms: list[str]
    slop: int = 0
    boost: float = 1.0

    def score(self, doc: Doc, corpus: Corpus) -> float | None:
        terms = doc.terms(self.field, self.kind)
        if any(t not in terms.counts for t in self.terms):
            return None
        freq = phrase_frequency(terms.tokens, terms.positions, self.terms, self.slop)
        if freq <= 0:
            return None
        stats = corpus.stats(self.field, self.kind)
        weight = sum(idf(stats, stats.doc_freq[t]) for t in self.terms)
        return bm25(freq, len(terms.tokens), self.kind, stats, weight, self.boost)


def phrase_frequency(tokens: list[str], positions: list[int], phrase: list[str], slop: int) -> float:
    """How often the phrase occurs: a count when exact, a sum of ``1 / (1 + distance)`` when sloppy."""
    at: dict[str, list[int]] = {}
    for token, position in zip(tokens, positions):
        at.setdefault(token, []).append(position)
    if slop == 0:
        first = phrase[0]
        present = [set(at[t]) for t in phrase]
        return float(sum(1 for p in at[first] if all(p + k in present[k] for k in range(1, len(phrase)))))
    # Lucene's SloppyPhraseMatcher without repeated terms: advance the term that lags most.
    lists = [[p - offset for p in at[t]] for offset, t in enumerate(phrase)]
    pointers = [0] * len(lists)
    freq = 0.0
    while True:
        current = [lst[i] for lst, i in zip(lists, pointers)]
        length = max(current) - min(current)
        if length <= slop:
            freq += 1.0 / (1.0 + length)
        lag = current.index(min(current))
        pointers[lag] += 1
        if pointers[lag] >= len(lists[lag]):
            return freq


def tie_broken(scores: list[float], tie_breaker: float, boost: float) -> float | None:
    """The best score plus ``tie_breaker`` times the others (None: nothing matched), boosted."""
    if not scores:
        return None
    best = max(scores)
    return boost * (best + tie_breaker * (sum(scores) - best))


@dataclass
class Disjunction(Clause):
    """The best of its clauses, plus ``tie_breaker`` times the others (``dis_max``; ``multi_match``)."""

    clauses: list[Clause]
    tie_breaker: float = 0.0
    boost: float = 1.0

    def score(self, doc: Doc, corpus: Corpus) -> float | None:
        scores = [s for s in (c.score(doc, corpus) for c in self.clauses) if s is not None]
        return tie_broken(scores, self.tie_breaker, self.boost)


@dataclass
class BlendedTerm(Clause):
    """One term over several text fields as if they were one (``cross_fields``; Lucene's ``BlendedTermQuery``).

    Each field scores the term with the largest document frequency among the
    fields (capped by the field's own document count), and the best field wins,
    plus ``tie_breaker`` times the others.
    """

    fields: list[tuple[str, float]]
    term: str
    tie_breaker: float = 0.0
    boost: float = 1.0

    def blended_doc_freqs(self, corpus: Corpus) -> list[int]:
        """Each field's document frequency for the term, blended as Elasticsearch's ``BlendedTermQuery.blend``.

        The most frequent field keeps the largest frequency; each rarer field gets
        one more than the field before it, so it never outranks a more popular one.
        """
        cached = corpus.memo.get(id(self))
        if cached is None:
            every = [corpus.stats(f, TEXT) for f, _ in self.fields]
            own = [stats.doc_freq[self.term] for stats in every]
            max_doc = min([len(corpus.docs), *(stats.total_length for stats in every)])
            blended = [0] * len(own)
            actual = min(max_doc, max(own, default=0))
            prev = max(own, default=0)
            for i in sorted(range(len(own)), key=lambda i: -own[i]):
                if own[i] == 0:
                    break
                if prev > own[i]:
                    actual += 1
                blended[i] = min(max_doc, actual)
                prev = blended[i]
            cached = corpus.memo[id(self)] = blended
        return cached  # type: ignore[return-value]

    def score(self, doc: Doc, corpus: Corpus) -> float | None:
        blended = self.blended_doc_freqs(corpus)
        scores: list[float] = []
        for (path, weight), df in zip(self.fields, blended):
            terms = doc.terms(path, TEXT)
            freq = terms.counts.get(self.term, 0)
            if freq:
                stats = corpus.stats(path, TEXT)
                scores.append(bm25(freq, len(terms.tokens), TEXT, stats, idf(stats, df), weight))
        return tie_broken(scores, self.tie_breaker, self.boost)


@dataclass
class Term(Clause):
    """``term`` and ``terms`` on a field with no analysis (keywords, dates, numbers): whole values."""

    field: str
    values: list[Any]
    kind: str = DYNAMIC
    case_insensitive: bool = False
    constant: bool = True
    boost: float = 1.0

    def score(self, doc: Doc, corpus: Corpus) -> float | None:
        if self.field == "_id":
            return self.boost if any(str(w) == doc.id for w in self.values) else None
        if self.kind == UNMAPPED:
            return None
        for v in field_values(doc.source, self.field):
            for w in self.values:
                if values_equal(v, w, self.case_insensitive):
                    if self.constant or self.kind not in (KEYWORD, FLAT_OBJECT):
                        return self.boost
                    return term_score(doc, corpus, self.field, self.kind, as_keyword(v), self.boost)
        return None


@dataclass
class Range(Clause):
    field: str
    bounds: list[tuple[str, Any]]
    boost: float = 1.0

    def score(self, doc: Doc, corpus: Corpus) -> float | None:
        for v in field_values(doc.source, self.field):
            if all(compare(v, op, bound) for op, bound in self.bounds):
                return self.boost
        return None


def compare(value: Any, op: str, bound: Any) -> bool:
    ordered = comparable_pair(value, bound)
    if ordered is None:
        return False
    a, b = ordered
    if op == "gt":
        return bool(a > b)
    if op == "gte":
        return bool(a >= b)
    if op == "lt":
        return bool(a < b)
    return bool(a <= b)


def comparable_pair(value: Any, bound: Any) -> tuple[Any, Any] | None:
    """Bring a field value and a range bound to one comparable type."""
    if isinstance(value, bool) or isinstance(bound, bool):
        return (int(value), int(bound)) if isinstance(value, bool) and isinstance(bound, bool) else None
    if is_number(bound):
        a = as_float(value)
        if a is not None:
            return a, float(bound)
        dt = parse_date(value)
        return (epoch_millis(dt), float(bound)) if dt is not None else None
    bound_s = str(bound)
    bdt = parse_date(bound_s)
    if bdt is not None:
        if is_number(value):
            return float(value), epoch_millis(bdt)
        vdt = parse_date(value)
        if vdt is not None:
            return vdt, bdt
    bf = as_float(bound_s)
    vf = as_float(value)
    if bf is not None and vf is not None:
        return vf, bf
    if isinstance(value, str):
        return value, bound_s
    return None


class FieldFilter(Clause):
    """Matches or not on one field, scoring ``boost``: nothing on an unmapped field, a text field by its tokens."""

    field: str
    kind: str

    def score(self, doc: Doc, corpus: Corpus) -> float | None:
        if self.kind == UNMAPPED:
            return None
        if self.kind == TEXT:
            found = self.matches_tokens(doc.terms(self.field, TEXT))
        else:
            found = self.matches_values(field_values(doc.source, self.field))
        return self.boost if found else None

    def matches_tokens(self, terms: Terms) -> bool:  # pragma: no cover
        raise NotImplementedError

    def matches_values(self, values: list[Any]) -> bool:  # pragma: no cover
        raise NotImplementedError


@dataclass
class Exists(FieldFilter):
    field: str
    kind: str = DYNAMIC
    boost: float = 1.0

    def matches_tokens(self, terms: Terms) -> bool:
        return bool(terms.tokens)

    def matches_values(self, values: list[Any]) -> bool:
        return bool(values)


@dataclass
class Pattern(FieldFilter):
    """``prefix``, ``wildcard`` and ``regexp``: against a text field's tokens, or a keyword's whole value."""

    field: str
    #: A compiled RE2 pattern (``re2`` ships no type information).
    regex: Any
    kind: str = DYNAMIC
    boost: float = 1.0

    def matches_tokens(self, terms: Terms) -> bool:
        return any(self.regex.fullmatch(t) for t in terms.counts)

    def matches_values(self, values: list[Any]) -> bool:
        return any(
            self.regex.fullmatch(text) or (self.kind == DYNAMIC and any(self.regex.fullmatch(t) for t in analyze(text)))
            for text in map(as_keyword, values)
        )


@dataclass
class Ids(Clause):
    values: frozenset[str]
    boost: float = 1.0

    def score(self, doc: Doc, corpus: Corpus) -> float | None:
        return self.boost if doc.id in self.values else None


@dataclass
class ConstantScore(Clause):
    filter: Clause
    boost: float = 1.0

    def score(self, doc: Doc, corpus: Corpus) -> float | None:
        return self.boost if self.filter.score(doc, corpus) is not None else None


@dataclass
class Bool(Clause):
    must: list[Clause] = field(default_factory=list)
    filter: list[Clause] = field(default_factory=list)
    should: list[Clause] = field(default_factory=list)
    must_not: list[Clause] = field(default_factory=list)
    minimum_should_match: Any = None
    boost: float = 1.0

    def score(self, doc: Doc, corpus: Corpus) -> float | None:
        if not (self.must or self.filter or self.should or self.must_not):
            return self.boost  # an empty bool is match_all
        total = 0.0
        for c in self.must:
            s = c.score(doc, corpus)
            if s is None:
                return None
            total += s
        for c in self.filter:
            if c.score(doc, corpus) is None:
                return None
        for c in self.must_not:
            if c.score(doc, corpus) is not None:
                return None
        default = 0 if (self.must or self.filter) else 1
        needed = (
            minimum_should_match_count(self.minimum_should_match, len(self.should), default=default)
            if self.should
            else 0
        )
        matched = 0
        for c in self.should:
            s = c.score(doc, corpus)
            if s is not None:
                matched += 1
                total += s
        if matched < needed:
            return None
        # Like OpenSearch, filter/must_not-only bools score 0.0.
        return total * self.boost


def minimum_should_match_count(spec: Any, n: int, *, default: int) -> int:
    """Resolve ``minimum_should_match`` (int, negative int, "N", "N%", "-N%")."""
    if spec is None:
        return default
    text = str(spec).strip()
    if text.endswith("%"):
        pct = int(text[:-1])
        k = int(n * abs(pct) / 100)
        needed = k if pct >= 0 else n - k
    else:
        k = int(text)
        needed = k if k >= 0 else n + k
    return max(0, min(n, needed))


#: ``minimum_should_match`` counts clauses: anything beyond an int32 is a 400, not arithmetic on huge numbers.
MAX_MINIMUM_SHOULD_MATCH = 2**31 - 1


def check_minimum_should_match(qname: str, spec: Any) -> Any:
    if spec is None:
        return None
    if isinstance(spec, bool) or not (
        (isinstance(spec, int) and abs(spec) <= MAX_MINIMUM_SHOULD_MATCH)
        or (isinstance(spec, str) and re.fullmatch(r"\s*-?\d{1,9}%?\s*", spec))
    ):
        raise QueryParsingError(f"[{qname}] query: invalid [minimum_should_match] value [{spec}]")
    return spec
