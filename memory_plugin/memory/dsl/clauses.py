"""The query clauses: each scores a document (``None`` when it does not match)."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from memory_plugin.memory.dsl.values import (
    QueryParsingError,
    analyze,
    as_float,
    epoch_millis,
    field_values,
    is_number,
    parse_date,
    values_equal,
)

# --------------------------------------------------------------------------- clauses

Doc = tuple[str, Mapping[str, Any]]


class Clause:
    """A parsed query clause.  ``score`` is ``None`` for a non-matching doc."""

    boost: float = 1.0

    def score(self, doc_id: str, src: Mapping[str, Any]) -> float | None:  # pragma: no cover
        raise NotImplementedError


@dataclass
class MatchAll(Clause):
    boost: float = 1.0

    def score(self, doc_id: str, src: Mapping[str, Any]) -> float | None:
        return self.boost


@dataclass
class MatchNone(Clause):
    def score(self, doc_id: str, src: Mapping[str, Any]) -> float | None:
        return None


@dataclass
class Match(Clause):
    field: str
    tokens: list[str]
    operator: str = "or"
    minimum_should_match: Any = None
    zero_terms_all: bool = False
    raw: Any = None
    boost: float = 1.0

    def score(self, doc_id: str, src: Mapping[str, Any]) -> float | None:
        values = field_values(src, self.field)
        if not self.tokens:
            return self.boost if self.zero_terms_all and values else None
        if not values:
            return None
        doc_tokens: list[str] = []
        for v in values:
            if isinstance(v, str):
                doc_tokens.extend(analyze(v))
            elif is_number(v) or isinstance(v, bool):
                if self.raw is not None and values_equal(v, self.raw):
                    return self.boost
                doc_tokens.extend(analyze(str(v).lower() if isinstance(v, bool) else str(v)))
        counts = Counter(doc_tokens)
        wanted = list(dict.fromkeys(self.tokens))
        matched = [t for t in wanted if counts[t]]
        if self.operator == "and":
            needed = len(wanted)
        else:
            needed = minimum_should_match_count(self.minimum_should_match, len(wanted), default=1)
        if len(matched) < max(needed, 1):
            return None
        # A simple tf-style score: fraction of query terms present, plus a
        # small term-frequency bonus damped by document length.
        tf = sum(counts[t] for t in matched)
        return self.boost * (len(matched) / len(wanted) + tf / (tf + len(doc_tokens) + 1))


@dataclass
class MatchPhrase(Clause):
    field: str
    tokens: list[str]
    slop: int = 0
    boost: float = 1.0

    def score(self, doc_id: str, src: Mapping[str, Any]) -> float | None:
        values = field_values(src, self.field)
        if not self.tokens:
            return None
        n = len(self.tokens)
        for v in values:
            toks = analyze(str(v))
            first = self.tokens[0]
            for i in range(len(toks) - n + 1):
                if toks[i] == first and toks[i : i + n] == self.tokens:
                    return self.boost
        return None


@dataclass
class Term(Clause):
    field: str
    values: list[Any]
    case_insensitive: bool = False
    boost: float = 1.0

    def score(self, doc_id: str, src: Mapping[str, Any]) -> float | None:
        if self.field == "_id":
            return self.boost if any(str(w) == doc_id for w in self.values) else None
        for v in field_values(src, self.field):
            for w in self.values:
                if values_equal(v, w, self.case_insensitive):
                    return self.boost
        return None


@dataclass
class Range(Clause):
    field: str
    bounds: list[tuple[str, Any]]
    boost: float = 1.0

    def score(self, doc_id: str, src: Mapping[str, Any]) -> float | None:
        for v in field_values(src, self.field):
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


@dataclass
class Exists(Clause):
    field: str
    boost: float = 1.0

    def score(self, doc_id: str, src: Mapping[str, Any]) -> float | None:
        return self.boost if field_values(src, self.field) else None


@dataclass
class Pattern(Clause):
    """``prefix`` and ``wildcard``: matched against the raw value and its tokens."""

    field: str
    #: A compiled RE2 pattern (``re2`` ships no type information).
    regex: Any
    boost: float = 1.0

    def score(self, doc_id: str, src: Mapping[str, Any]) -> float | None:
        for v in field_values(src, self.field):
            if isinstance(v, bool):
                v = "true" if v else "false"
            text = str(v)
            if self.regex.fullmatch(text) or any(self.regex.fullmatch(t) for t in analyze(text)):
                return self.boost
        return None


@dataclass
class Ids(Clause):
    values: frozenset[str]
    boost: float = 1.0

    def score(self, doc_id: str, src: Mapping[str, Any]) -> float | None:
        return self.boost if doc_id in self.values else None


@dataclass
class ConstantScore(Clause):
    filter: Clause
    boost: float = 1.0

    def score(self, doc_id: str, src: Mapping[str, Any]) -> float | None:
        return self.boost if self.filter.score(doc_id, src) is not None else None


@dataclass
class Bool(Clause):
    must: list[Clause] = field(default_factory=list)
    filter: list[Clause] = field(default_factory=list)
    should: list[Clause] = field(default_factory=list)
    must_not: list[Clause] = field(default_factory=list)
    minimum_should_match: Any = None
    boost: float = 1.0

    def score(self, doc_id: str, src: Mapping[str, Any]) -> float | None:
        if not (self.must or self.filter or self.should or self.must_not):
            return self.boost  # an empty bool is match_all
        total = 0.0
        for c in self.must:
            s = c.score(doc_id, src)
            if s is None:
                return None
            total += s
        for c in self.filter:
            if c.score(doc_id, src) is None:
                return None
        for c in self.must_not:
            if c.score(doc_id, src) is not None:
                return None
        default = 0 if (self.must or self.filter) else 1
        needed = (
            minimum_should_match_count(self.minimum_should_match, len(self.should), default=default)
            if self.should
            else 0
        )
        matched = 0
        for c in self.should:
            s = c.score(doc_id, src)
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
