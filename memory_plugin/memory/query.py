"""A small OpenSearch query-DSL evaluator over in-memory documents.

The 2.12+ ``_search`` endpoints of the conversational memory API take an
OpenSearch search body.  :func:`parse_search` validates the whole body up
front and turns it into a :class:`SearchQuery`; :func:`execute` evaluates it
over candidate documents (``(id, _source)`` pairs the caller has already
scoped to the principal); :func:`search_response` renders the OpenSearch
search response.

Supported: ``query`` (``match_all``, ``match_none``, ``match``,
``match_phrase``, ``term``, ``terms``, ``range``, ``exists``, ``prefix``,
``wildcard``, ``ids``, ``bool``, ``constant_score``), ``sort``, ``from``,
``size``, ``_source`` and ``track_total_hits`` (accepted, ignored).

Error wording follows OpenSearch where it has one (``unknown query [x]``,
``Unknown key for a START_OBJECT in [x].``, ``[size] parameter cannot be
negative, found [-1]``, ``Result window is too large, ...``).
"""

from __future__ import annotations

import fnmatch
import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from memory_plugin.errors import InvalidArgument, ParseFailure
from memory_plugin.opensearch_client import MAX_RESULT_WINDOW

__all__ = [
    "MAX_RESULT_WINDOW",
    "META_INDEX",
    "MESSAGE_INDEX",
    "Hit",
    "QueryParsingError",
    "SearchQuery",
    "SearchResult",
    "SortSpec",
    "execute",
    "parse_search",
    "search",
    "search_response",
]

#: ml-commons 2.12+ index names (``ConversationalIndexConstants``).
META_INDEX = ".plugins-ml-memory-meta"
MESSAGE_INDEX = ".plugins-ml-memory-message"


class QueryParsingError(InvalidArgument):
    """A search body OpenSearch would reject while parsing it (HTTP 400)."""

    type = "parsing_exception"


# --------------------------------------------------------------------------- helpers

_TOKEN_RE = re.compile(r"\w+", re.UNICODE)
_MISSING = object()


def _analyze(text: str) -> list[str]:
    """Approximate the standard analyzer: lowercase word tokens."""
    return _TOKEN_RE.findall(text.lower())


def _token_name(value: Any) -> str:
    """The XContent token OpenSearch would name for a JSON value."""
    if isinstance(value, Mapping):
        return "START_OBJECT"
    if isinstance(value, list | tuple):
        return "START_ARRAY"
    if isinstance(value, bool):
        return "VALUE_BOOLEAN"
    if isinstance(value, int | float):
        return "VALUE_NUMBER"
    if value is None:
        return "VALUE_NULL"
    return "VALUE_STRING"


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _strip_keyword(path: str) -> str:
    return path[: -len(".keyword")] if path.endswith(".keyword") else path


def _lookup(obj: Any, path: str) -> list[Any]:
    """Values at a dotted ``path``; arrays are flattened, as OpenSearch does."""
    if isinstance(obj, list | tuple):
        out: list[Any] = []
        for item in obj:
            out.extend(_lookup(item, path))
        return out
    if not isinstance(obj, Mapping):
        return []
    if path in obj:  # literal key, possibly containing dots
        value = obj[path]
        if isinstance(value, list | tuple):
            return [v for v in _flatten_list(value)]
        return [value]
    head, dot, rest = path.partition(".")
    while dot:
        if head in obj:
            found = _lookup(obj[head], rest)
            if found:
                return found
        nxt, dot, rest = rest.partition(".")
        head = f"{head}.{nxt}"
    return []


def _flatten_list(values: Iterable[Any]) -> Iterable[Any]:
    for v in values:
        if isinstance(v, list | tuple):
            yield from _flatten_list(v)
        else:
            yield v


def _field_values(src: Mapping[str, Any], path: str) -> list[Any]:
    """Leaf values for a query on ``path``.

    A ``.keyword`` suffix is dropped when the suffixed path does not exist.
    An object value (e.g. the ``flat_object`` ``additional_info``) contributes
    all its leaf values, as a query on a ``flat_object`` root does.
    """
    values = _lookup(src, path)
    if not values and path.endswith(".keyword"):
        values = _lookup(src, _strip_keyword(path))
    out: list[Any] = []
    for v in values:
        _leaves(v, out)
    return [v for v in out if v is not None]


def _leaves(value: Any, out: list[Any]) -> None:
    if isinstance(value, Mapping):
        for v in value.values():
            _leaves(v, out)
    elif isinstance(value, list | tuple):
        for v in value:
            _leaves(v, out)
    else:
        out.append(value)


_ISO_RE = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})"
    r"(?:[T ](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d{1,9}))?)?)?"
    r"(Z|[+-]\d{2}:?\d{2})?$"
)
_DATE_MATH_RE = re.compile(r"^now((?:[+-]\d+[yMwdhHms])*)(?:/([yMwdhHms]))?$")
_UNIT_RE = re.compile(r"([+-])(\d+)([yMwdhHms])")


def _parse_instant(value: Any) -> datetime | None:
    """An aware UTC datetime for an ISO 8601 string or ``now`` date math."""
    if not isinstance(value, str):
        return None
    text = value.strip()
    m = _ISO_RE.match(text)
    if m:
        year, month, day, hh, mm, ss, frac, tz = m.groups()
        try:
            micro = int((frac or "0")[:6].ljust(6, "0"))
            dt = datetime(int(year), int(month), int(day), int(hh or 0), int(mm or 0), int(ss or 0), micro)
        except ValueError:
            return None
        if tz and tz != "Z":
            sign = 1 if tz[0] == "+" else -1
            digits = tz[1:].replace(":", "")
            offset = timedelta(hours=int(digits[:2]), minutes=int(digits[2:]))
            dt = (dt - sign * offset).replace(tzinfo=UTC)
        else:
            dt = dt.replace(tzinfo=UTC)
        return dt
    m = _DATE_MATH_RE.match(text)
    if m:
        dt = datetime.now(UTC)
        for sign, amount, unit in _UNIT_RE.findall(m.group(1)):
            dt = _add(dt, int(amount) * (1 if sign == "+" else -1), unit)
        if m.group(2):
            dt = _round_down(dt, m.group(2))
        return dt
    return None


def _add(dt: datetime, n: int, unit: str) -> datetime:
    if unit == "y":
        return dt.replace(year=dt.year + n)
    if unit == "M":
        month = dt.month - 1 + n
        return dt.replace(year=dt.year + month // 12, month=month % 12 + 1, day=min(dt.day, 28))
    seconds = {"w": 604800, "d": 86400, "h": 3600, "H": 3600, "m": 60, "s": 1}[unit]
    return dt + timedelta(seconds=n * seconds)


def _round_down(dt: datetime, unit: str) -> datetime:
    if unit == "y":
        return dt.replace(month=1, day=1, hour=0, minute=0, second=0, microsecond=0)
    if unit == "M":
        return dt.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    if unit == "w":
        dt = dt - timedelta(days=dt.weekday())
        return dt.replace(hour=0, minute=0, second=0, microsecond=0)
    if unit == "d":
        return dt.replace(hour=0, minute=0, second=0, microsecond=0)
    if unit in ("h", "H"):
        return dt.replace(minute=0, second=0, microsecond=0)
    if unit == "m":
        return dt.replace(second=0, microsecond=0)
    return dt.replace(microsecond=0)


def _epoch_ms(dt: datetime) -> float:
    return dt.timestamp() * 1000.0


def _as_float(value: Any) -> float | None:
    if _is_number(value):
        return float(value)
    if isinstance(value, str):
        try:
            f = float(value)
        except ValueError:
            return None
        return f if math.isfinite(f) else None
    return None


def _values_equal(field_value: Any, wanted: Any, case_insensitive: bool = False) -> bool:
    """Term equality with OpenSearch-like coercion between JSON scalar types."""
    if isinstance(wanted, bool) or isinstance(field_value, bool):
        norm = {True: "true", False: "false"}
        a = norm[field_value] if isinstance(field_value, bool) else str(field_value).lower()
        b = norm[wanted] if isinstance(wanted, bool) else str(wanted).lower()
        return a == b
    if _is_number(wanted) or _is_number(field_value):
        fa, fb = _as_float(field_value), _as_float(wanted)
        if fa is not None and fb is not None:
            return fa == fb
        if isinstance(field_value, str) and _is_number(wanted):
            fdt = _parse_instant(field_value)
            return fdt is not None and _epoch_ms(fdt) == float(wanted)
        return False
    a_s, b_s = str(field_value), str(wanted)
    if a_s == b_s or (case_insensitive and a_s.lower() == b_s.lower()):
        return True
    a_dt, b_dt = _parse_instant(a_s), _parse_instant(b_s)
    return a_dt is not None and b_dt is not None and _ISO_RE.match(b_s) is not None and a_dt == b_dt


def _check_scalar(qname: str, value: Any) -> Any:
    if isinstance(value, Mapping | list | tuple) or value is None:
        raise QueryParsingError(f"[{qname}] query does not support value of type [{_token_name(value)}]")
    return value


def _boost(qname: str, value: Any) -> float:
    f = _as_float(value)
    if f is None or isinstance(value, bool):
        raise QueryParsingError(f"[{qname}] query: [boost] must be a number")
    return f


def _single_field(qname: str, body: Any) -> tuple[str, Any, dict[str, Any]]:
    """Split ``{field: value_or_options, "boost"?, "_name"?}`` (one field only)."""
    if not isinstance(body, Mapping):
        raise QueryParsingError(f"[{qname}] query malformed, no start_object after query name")
    fields = [k for k in body if k not in ("boost", "_name")]
    if not fields:
        raise QueryParsingError(f"[{qname}] query malformed, no field specified")
    if len(fields) > 1:
        raise QueryParsingError(
            f"[{qname}] query doesn't support multiple fields, found [{fields[0]}] and [{fields[1]}]"
        )
    extra = {k: body[k] for k in body if k in ("boost", "_name")}
    return fields[0], body[fields[0]], extra


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
        values = _field_values(src, self.field)
        if not self.tokens:
            return self.boost if self.zero_terms_all and values else None
        if not values:
            return None
        doc_tokens: list[str] = []
        for v in values:
            if isinstance(v, str):
                doc_tokens.extend(_analyze(v))
            elif _is_number(v) or isinstance(v, bool):
                if self.raw is not None and _values_equal(v, self.raw):
                    return self.boost
                doc_tokens.extend(_analyze(str(v).lower() if isinstance(v, bool) else str(v)))
        wanted = list(dict.fromkeys(self.tokens))
        matched = [t for t in wanted if t in doc_tokens]
        if self.operator == "and":
            needed = len(wanted)
        else:
            needed = _msm(self.minimum_should_match, len(wanted), default=1)
        if len(matched) < max(needed, 1):
            return None
        # A simple tf-style score: fraction of query terms present, plus a
        # small term-frequency bonus damped by document length.
        tf = sum(doc_tokens.count(t) for t in matched)
        return self.boost * (len(matched) / len(wanted) + tf / (tf + len(doc_tokens) + 1))


@dataclass
class MatchPhrase(Clause):
    field: str
    tokens: list[str]
    slop: int = 0
    boost: float = 1.0

    def score(self, doc_id: str, src: Mapping[str, Any]) -> float | None:
        values = _field_values(src, self.field)
        if not self.tokens:
            return None
        n = len(self.tokens)
        for v in values:
            toks = _analyze(str(v))
            for i in range(len(toks) - n + 1):
                if toks[i : i + n] == self.tokens:
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
        for v in _field_values(src, self.field):
            for w in self.values:
                if _values_equal(v, w, self.case_insensitive):
                    return self.boost
        return None


@dataclass
class Range(Clause):
    field: str
    bounds: list[tuple[str, Any]]
    boost: float = 1.0

    def score(self, doc_id: str, src: Mapping[str, Any]) -> float | None:
        for v in _field_values(src, self.field):
            if all(_compare(v, op, bound) for op, bound in self.bounds):
                return self.boost
        return None


def _compare(value: Any, op: str, bound: Any) -> bool:
    ordered = _ordered_pair(value, bound)
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


def _ordered_pair(value: Any, bound: Any) -> tuple[Any, Any] | None:
    """Bring a field value and a range bound to one comparable type."""
    if isinstance(value, bool) or isinstance(bound, bool):
        return (int(value), int(bound)) if isinstance(value, bool) and isinstance(bound, bool) else None
    if _is_number(bound):
        a = _as_float(value)
        if a is not None:
            return a, float(bound)
        dt = _parse_instant(value)
        return (_epoch_ms(dt), float(bound)) if dt is not None else None
    bound_s = str(bound)
    bdt = _parse_instant(bound_s)
    if bdt is not None:
        if _is_number(value):
            return float(value), _epoch_ms(bdt)
        vdt = _parse_instant(value)
        if vdt is not None:
            return vdt, bdt
    bf = _as_float(bound_s)
    vf = _as_float(value)
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
        return self.boost if _field_values(src, self.field) else None


@dataclass
class Pattern(Clause):
    """``prefix`` and ``wildcard``: matched against the raw value and its tokens."""

    field: str
    regex: re.Pattern[str]
    boost: float = 1.0

    def score(self, doc_id: str, src: Mapping[str, Any]) -> float | None:
        for v in _field_values(src, self.field):
            if isinstance(v, bool):
                v = "true" if v else "false"
            text = str(v)
            if self.regex.fullmatch(text) or any(self.regex.fullmatch(t) for t in _analyze(text)):
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
        needed = _msm(self.minimum_should_match, len(self.should), default=default) if self.should else 0
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


def _msm(spec: Any, n: int, *, default: int) -> int:
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


def _validate_msm(qname: str, spec: Any) -> Any:
    if spec is None:
        return None
    if isinstance(spec, bool) or not (
        isinstance(spec, int) or (isinstance(spec, str) and re.fullmatch(r"\s*-?\d+%?\s*", spec))
    ):
        raise QueryParsingError(f"[{qname}] query: invalid [minimum_should_match] value [{spec}]")
    return spec


# --------------------------------------------------------------------------- query parsing

#: Real OpenSearch query types this evaluator does not implement.
_UNSUPPORTED = frozenset(
    {
        "fuzzy",
        "regexp",
        "query_string",
        "simple_query_string",
        "multi_match",
        "match_phrase_prefix",
        "match_bool_prefix",
        "combined_fields",
        "nested",
        "has_child",
        "has_parent",
        "parent_id",
        "geo_bounding_box",
        "geo_distance",
        "geo_polygon",
        "geo_shape",
        "script",
        "script_score",
        "function_score",
        "more_like_this",
        "dis_max",
        "boosting",
        "span_term",
        "span_first",
        "span_near",
        "span_or",
        "span_not",
        "span_containing",
        "span_within",
        "span_multi",
        "field_masking_span",
        "intervals",
        "knn",
        "neural",
        "neural_sparse",
        "hybrid",
        "terms_set",
        "distance_feature",
        "percolate",
        "wrapper",
        "rank_feature",
        "type",
        "template",
        "shape",
        "xy_shape",
        "pinned",
    }
)

_FIELD_OPTIONS = {
    "match": {
        "query",
        "operator",
        "minimum_should_match",
        "zero_terms_query",
        "boost",
        "analyzer",
        "lenient",
        "fuzziness",
        "prefix_length",
        "max_expansions",
        "auto_generate_synonyms_phrase_query",
        "_name",
    },
    "match_phrase": {"query", "slop", "boost", "analyzer", "zero_terms_query", "_name"},
    "term": {"value", "boost", "case_insensitive", "_name"},
    "prefix": {"value", "boost", "case_insensitive", "rewrite", "_name"},
    "wildcard": {"value", "wildcard", "boost", "case_insensitive", "rewrite", "_name"},
    "range": {
        "gt",
        "gte",
        "lt",
        "lte",
        "from",
        "to",
        "include_lower",
        "include_upper",
        "format",
        "time_zone",
        "relation",
        "boost",
        "_name",
    },
}


def _parse_query(q: Any) -> Clause:
    if not isinstance(q, Mapping):
        raise QueryParsingError(f"[_na] query malformed, must start with start_object, found [{_token_name(q)}]")
    if len(q) != 1:
        if not q:
            raise QueryParsingError("query malformed, empty clause found")
        names = list(q)
        raise QueryParsingError(f"[{names[0]}] malformed query, expected [END_OBJECT] but found [FIELD_NAME]")
    ((name, body),) = q.items()
    parser = _PARSERS.get(name)
    if parser is None:
        if name in _UNSUPPORTED:
            raise QueryParsingError(f"unsupported query [{name}]")
        raise QueryParsingError(f"unknown query [{name}]")
    return parser(body)


def _check_options(qname: str, opts: Mapping[str, Any]) -> None:
    for k in opts:
        if k not in _FIELD_OPTIONS[qname]:
            raise QueryParsingError(f"[{qname}] query does not support [{k}]")


def _p_match_all(body: Any) -> Clause:
    if not isinstance(body, Mapping):
        raise QueryParsingError("[match_all] query malformed, no start_object after query name")
    for k in body:
        if k not in ("boost", "_name"):
            raise QueryParsingError(f"[match_all] query does not support [{k}]")
    return MatchAll(boost=_boost("match_all", body.get("boost", 1.0)))


def _p_match_none(body: Any) -> Clause:
    if not isinstance(body, Mapping):
        raise QueryParsingError("[match_none] query malformed, no start_object after query name")
    return MatchNone()


def _p_match(body: Any) -> Clause:
    fname, value, extra = _single_field("match", body)
    opts: Mapping[str, Any] = value if isinstance(value, Mapping) else {"query": value}
    _check_options("match", opts)
    if "query" not in opts:
        raise QueryParsingError("[match] query malformed, no [query] specified")
    text = _check_scalar("match", opts["query"])
    operator = str(opts.get("operator", "or")).lower()
    if operator not in ("or", "and"):
        raise QueryParsingError(f"[match] query: unknown operator [{opts.get('operator')}]")
    ztq = str(opts.get("zero_terms_query", "none")).lower()
    if ztq not in ("none", "all"):
        raise QueryParsingError(f"[match] query: unsupported zero_terms_query value [{opts.get('zero_terms_query')}]")
    raw_text = ("true" if text else "false") if isinstance(text, bool) else str(text)
    return Match(
        field=fname,
        tokens=_analyze(raw_text),
        operator=operator,
        minimum_should_match=_validate_msm("match", opts.get("minimum_should_match")),
        zero_terms_all=ztq == "all",
        raw=text,
        boost=_boost("match", opts.get("boost", extra.get("boost", 1.0))),
    )


def _p_match_phrase(body: Any) -> Clause:
    fname, value, extra = _single_field("match_phrase", body)
    opts: Mapping[str, Any] = value if isinstance(value, Mapping) else {"query": value}
    _check_options("match_phrase", opts)
    if "query" not in opts:
        raise QueryParsingError("[match_phrase] query malformed, no [query] specified")
    text = _check_scalar("match_phrase", opts["query"])
    return MatchPhrase(
        field=fname,
        tokens=_analyze(str(text)),
        boost=_boost("match_phrase", opts.get("boost", extra.get("boost", 1.0))),
    )


def _p_term(body: Any) -> Clause:
    fname, value, extra = _single_field("term", body)
    opts: Mapping[str, Any] = value if isinstance(value, Mapping) else {"value": value}
    _check_options("term", opts)
    if "value" not in opts:
        raise QueryParsingError("[term] query malformed, no [value] specified")
    if opts["value"] is None:
        raise QueryParsingError("value cannot be null")
    wanted = _check_scalar("term", opts["value"])
    return Term(
        field=fname,
        values=[wanted],
        case_insensitive=bool(opts.get("case_insensitive", False)),
        boost=_boost("term", opts.get("boost", extra.get("boost", 1.0))),
    )


def _p_terms(body: Any) -> Clause:
    if not isinstance(body, Mapping):
        raise QueryParsingError("[terms] query malformed, no start_object after query name")
    fields = [k for k in body if k not in ("boost", "_name")]
    if not fields:
        raise QueryParsingError("[terms] query malformed, no field specified")
    if len(fields) > 1:
        raise QueryParsingError(
            f"[terms] query does not support multiple fields, found [{fields[0]}] and [{fields[1]}]"
        )
    fname = fields[0]
    values = body[fname]
    if not isinstance(values, list | tuple):
        raise QueryParsingError(f"[terms] query does not support [{fname}]")
    for v in values:
        if v is None:
            raise QueryParsingError("No value specified for terms query")
        _check_scalar("terms", v)
    return Term(field=fname, values=list(values), boost=_boost("terms", body.get("boost", 1.0)))


def _p_range(body: Any) -> Clause:
    fname, opts, extra = _single_field("range", body)
    if not isinstance(opts, Mapping):
        raise QueryParsingError(f"[range] query does not support [{fname}]")
    _check_options("range", opts)
    bounds: list[tuple[str, Any]] = []
    for op in ("gt", "gte", "lt", "lte"):
        if op in opts and opts[op] is not None:
            bounds.append((op, _check_range_bound(opts[op])))
    include_lower = bool(opts.get("include_lower", True))
    include_upper = bool(opts.get("include_upper", True))
    if opts.get("from") is not None:
        bounds.append(("gte" if include_lower else "gt", _check_range_bound(opts["from"])))
    if opts.get("to") is not None:
        bounds.append(("lte" if include_upper else "lt", _check_range_bound(opts["to"])))
    return Range(field=fname, bounds=bounds, boost=_boost("range", opts.get("boost", extra.get("boost", 1.0))))


def _check_range_bound(value: Any) -> Any:
    if isinstance(value, Mapping | list | tuple):
        raise QueryParsingError(f"[range] query does not support value of type [{_token_name(value)}]")
    if isinstance(value, str) and value.strip().startswith("now") and _parse_instant(value) is None:
        raise QueryParsingError(f"failed to parse date field [{value}]")
    return value


def _p_exists(body: Any) -> Clause:
    if not isinstance(body, Mapping):
        raise QueryParsingError("[exists] query malformed, no start_object after query name")
    for k in body:
        if k not in ("field", "boost", "_name"):
            raise QueryParsingError(f"[exists] query does not support [{k}]")
    fname = body.get("field")
    if not isinstance(fname, str) or not fname:
        raise QueryParsingError("[exists] must be provided with a [field]")
    return Exists(field=fname, boost=_boost("exists", body.get("boost", 1.0)))


def _pattern_clause(qname: str, body: Any, translate: Callable[[str], str]) -> Clause:
    fname, value, extra = _single_field(qname, body)
    opts: Mapping[str, Any] = value if isinstance(value, Mapping) else {"value": value}
    _check_options(qname, opts)
    raw = opts.get("value", opts.get("wildcard") if qname == "wildcard" else None)
    if raw is None:
        raise QueryParsingError(f"[{qname}] query malformed, no [value] specified")
    raw = str(_check_scalar(qname, raw))
    flags = re.IGNORECASE | re.DOTALL if opts.get("case_insensitive") else re.DOTALL
    return Pattern(
        field=fname,
        regex=re.compile(translate(raw), flags),
        boost=_boost(qname, opts.get("boost", extra.get("boost", 1.0))),
    )


def _wildcard_regex(pattern: str) -> str:
    out = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            out.append(re.escape(pattern[i + 1]))
            i += 2
            continue
        out.append(".*" if ch == "*" else "." if ch == "?" else re.escape(ch))
        i += 1
    return "".join(out)


def _p_prefix(body: Any) -> Clause:
    return _pattern_clause("prefix", body, lambda p: re.escape(p) + ".*")


def _p_wildcard(body: Any) -> Clause:
    return _pattern_clause("wildcard", body, _wildcard_regex)


def _p_ids(body: Any) -> Clause:
    if not isinstance(body, Mapping):
        raise QueryParsingError("[ids] query malformed, no start_object after query name")
    for k in body:
        if k not in ("values", "boost", "_name", "type"):
            raise QueryParsingError(f"[ids] query does not support [{k}]")
    values = body.get("values", [])
    if not isinstance(values, list | tuple):
        raise QueryParsingError("[ids] query malformed, [values] must be an array")
    for v in values:
        if isinstance(v, Mapping | list | tuple) or v is None:
            raise QueryParsingError("[ids] query malformed, values must be strings")
    return Ids(values=frozenset(str(v) for v in values), boost=_boost("ids", body.get("boost", 1.0)))


def _p_constant_score(body: Any) -> Clause:
    if not isinstance(body, Mapping):
        raise QueryParsingError("[constant_score] query malformed, no start_object after query name")
    for k in body:
        if k not in ("filter", "boost", "_name"):
            raise QueryParsingError(f"[constant_score] query does not support [{k}]")
    if "filter" not in body:
        raise QueryParsingError("[constant_score] requires a 'filter' element")
    return ConstantScore(filter=_parse_query(body["filter"]), boost=_boost("constant_score", body.get("boost", 1.0)))


def _p_bool(body: Any) -> Clause:
    if not isinstance(body, Mapping):
        raise QueryParsingError("[bool] query malformed, no start_object after query name")
    parts: dict[str, list[Clause]] = {"must": [], "filter": [], "should": [], "must_not": []}
    for k, v in body.items():
        if k in parts:
            items = v if isinstance(v, list | tuple) else [v]
            parts[k] = [_parse_query(item) for item in items]
        elif k not in ("minimum_should_match", "boost", "_name", "adjust_pure_negative"):
            raise QueryParsingError(f"[bool] query does not support [{k}]")
    return Bool(
        must=parts["must"],
        filter=parts["filter"],
        should=parts["should"],
        must_not=parts["must_not"],
        minimum_should_match=_validate_msm("bool", body.get("minimum_should_match")),
        boost=_boost("bool", body.get("boost", 1.0)),
    )


_PARSERS: dict[str, Callable[[Any], Clause]] = {
    "match_all": _p_match_all,
    "match_none": _p_match_none,
    "match": _p_match,
    "match_phrase": _p_match_phrase,
    "term": _p_term,
    "terms": _p_terms,
    "range": _p_range,
    "exists": _p_exists,
    "prefix": _p_prefix,
    "wildcard": _p_wildcard,
    "ids": _p_ids,
    "bool": _p_bool,
    "constant_score": _p_constant_score,
}


# --------------------------------------------------------------------------- sort / _source


@dataclass(frozen=True)
class SortSpec:
    field: str  # "_score", "_id", "_doc" or a (dotted) field path
    order: str  # "asc" | "desc"
    missing: str = "_last"  # "_last" | "_first"


def _parse_order(fname: str, order: Any) -> str:
    if not isinstance(order, str) or order.lower() not in ("asc", "desc"):
        raise QueryParsingError(f"[{fname}] sort order [{order}] must be one of [asc, desc]")
    return order.lower()


def _parse_sort(spec: Any) -> tuple[SortSpec, ...]:
    items = spec if isinstance(spec, list | tuple) else [spec]
    out: list[SortSpec] = []
    for item in items:
        if isinstance(item, str):
            out.append(SortSpec(item, "desc" if item == "_score" else "asc"))
        elif isinstance(item, Mapping) and len(item) == 1:
            ((fname, opts),) = item.items()
            if isinstance(opts, str):
                out.append(SortSpec(fname, _parse_order(fname, opts)))
            elif isinstance(opts, Mapping):
                for k in opts:
                    if k not in ("order", "missing", "unmapped_type", "mode", "format", "numeric_type"):
                        raise QueryParsingError(f"[field_sort] unknown field [{k}]")
                order = (
                    _parse_order(fname, opts["order"]) if "order" in opts else ("desc" if fname == "_score" else "asc")
                )
                missing = opts.get("missing", "_last")
                if missing not in ("_last", "_first"):
                    raise QueryParsingError(f"[{fname}] sort: unsupported [missing] value [{missing}]")
                out.append(SortSpec(fname, order, missing))
            else:
                raise QueryParsingError(
                    f"malformed sort format, within the sort array, an object, or an actual string are allowed, found [{_token_name(opts)}]"
                )
        else:
            raise QueryParsingError(
                "malformed sort format, within the sort array, an object, or an actual string are allowed"
            )
    return tuple(out)


@dataclass(frozen=True)
class SourceFilter:
    enabled: bool = True
    includes: tuple[str, ...] = ()
    excludes: tuple[str, ...] = ()

    def apply(self, src: Mapping[str, Any]) -> dict[str, Any] | None:
        if not self.enabled:
            return None
        if not self.includes and not self.excludes:
            return dict(src)
        return _filter_obj(src, "", self.includes, self.excludes)


def _filter_obj(obj: Mapping[str, Any], prefix: str, inc: tuple[str, ...], exc: tuple[str, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in obj.items():
        path = f"{prefix}{k}"
        if any(fnmatch.fnmatchcase(path, p) for p in exc):
            continue
        included = not inc or any(fnmatch.fnmatchcase(path, p) for p in inc)
        if isinstance(v, Mapping):
            deeper = included or any(p.startswith(path + ".") or p.startswith("*") for p in inc)
            if deeper:
                sub = _filter_obj(v, path + ".", () if included else inc, exc)
                if sub or included:
                    out[k] = sub
        elif isinstance(v, list | tuple) and any(isinstance(x, Mapping) for x in v):
            deeper = included or any(p.startswith(path + ".") or p.startswith("*") for p in inc)
            if deeper:
                sub_inc = () if included else inc
                items = [_filter_obj(x, path + ".", sub_inc, exc) if isinstance(x, Mapping) else x for x in v]
                items = [x for x in items if included or x != {}]
                if items or included:
                    out[k] = items
        elif included:
            out[k] = v
    return out


def _str_list(value: Any, what: str) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise QueryParsingError(f"Unknown key for a {_token_name(value)} in [{what}].")


def _parse_source(value: Any) -> SourceFilter:
    if isinstance(value, bool):
        return SourceFilter(enabled=value)
    if isinstance(value, str | list | tuple):
        return SourceFilter(includes=_str_list(value, "_source"))
    if isinstance(value, Mapping):
        inc: tuple[str, ...] = ()
        exc: tuple[str, ...] = ()
        for k, v in value.items():
            if k in ("includes", "include"):
                inc = _str_list(v, k)
            elif k in ("excludes", "exclude"):
                exc = _str_list(v, k)
            else:
                raise QueryParsingError(f"Unknown key for a {_token_name(v)} in [{k}].")
        return SourceFilter(includes=inc, excludes=exc)
    raise QueryParsingError(f"Unknown key for a {_token_name(value)} in [_source].")


# --------------------------------------------------------------------------- public API


@dataclass(frozen=True)
class SearchQuery:
    query: Clause
    sort: tuple[SortSpec, ...] = ()
    from_: int = 0
    size: int = 10
    source: SourceFilter = SourceFilter()

    @property
    def scores_tracked(self) -> bool:
        """OpenSearch leaves ``_score`` null when sorting by fields only."""
        return not self.sort or any(s.field == "_score" for s in self.sort)


@dataclass(frozen=True)
class Hit:
    id: str
    score: float | None
    source: dict[str, Any] | None
    sort: tuple[Any, ...] | None = None


@dataclass(frozen=True)
class SearchResult:
    total: int
    max_score: float | None
    hits: tuple[Hit, ...]


_TOP_LEVEL = ("query", "sort", "from", "size", "_source", "track_total_hits")


def _int_param(name: str, value: Any) -> int:
    if isinstance(value, bool) or value is None:
        raise QueryParsingError(f"[{name}] must be an integer, found [{_token_name(value)}]")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            pass
    raise QueryParsingError(f"[{name}] must be an integer, found [{value}]")


def parse_search(body: Mapping[str, Any] | None, *, max_size: int = MAX_RESULT_WINDOW) -> SearchQuery:
    """Validate a whole search body and compile it.

    Raises :class:`QueryParsingError` (``parsing_exception``) for malformed or
    unsupported DSL, :class:`~memory_plugin.errors.InvalidArgument`
    (``illegal_argument_exception``) for bad paging, and
    :class:`~memory_plugin.errors.ParseFailure` when the body is not an object.
    """
    if body is None:
        body = {}
    if not isinstance(body, Mapping):
        raise ParseFailure(f"request body must be a JSON object, found [{_token_name(body)}]")
    for key, value in body.items():
        if key not in _TOP_LEVEL:
            raise QueryParsingError(f"Unknown key for a {_token_name(value)} in [{key}].", parameter=key)

    query: Clause = MatchAll()
    if body.get("query") is not None:
        query = _parse_query(body["query"])
    sort = _parse_sort(body["sort"]) if body.get("sort") is not None else ()

    from_ = _int_param("from", body["from"]) if body.get("from") is not None else 0
    size = _int_param("size", body["size"]) if body.get("size") is not None else 10
    if size < 0:
        raise InvalidArgument(f"[size] parameter cannot be negative, found [{size}]", parameter="size")
    if from_ < 0:
        raise InvalidArgument(f"[from] parameter cannot be negative, found [{from_}]", parameter="from")
    if size > max_size:
        raise InvalidArgument(
            f"Result window is too large, size must be less than or equal to: [{max_size}] but was [{size}].",
            parameter="size",
        )
    if from_ + size > MAX_RESULT_WINDOW:
        raise InvalidArgument(
            "Result window is too large, from + size must be less than or equal to: "
            f"[{MAX_RESULT_WINDOW}] but was [{from_ + size}]. See the scroll api for a more efficient way "
            "to request large data sets. This limit can be set by changing the [index.max_result_window] "
            "index level setting.",
            parameter="from",
        )

    tth = body.get("track_total_hits")
    if tth is not None and not isinstance(tth, bool | int):
        raise QueryParsingError(f"[track_total_hits] must be a boolean or an integer, found [{tth}]")

    source = _parse_source(body["_source"]) if body.get("_source") is not None else SourceFilter()
    return SearchQuery(query=query, sort=sort, from_=from_, size=size, source=source)


def _sort_value(src: Mapping[str, Any], doc_id: str, spec: SortSpec) -> Any:
    if spec.field == "_id":
        return doc_id
    values = [v for v in _field_values(src, spec.field) if not isinstance(v, Mapping)]
    keyed = [k for k in (_sortable(v) for v in values) if k is not None]
    if not keyed:
        return _MISSING
    return min(keyed) if spec.order == "asc" else max(keyed)


def _sortable(value: Any) -> tuple[int, Any] | None:
    """A key that orders numbers and dates numerically and strings lexically."""
    if isinstance(value, bool):
        return (0, float(value))
    if _is_number(value):
        return (0, float(value))
    if isinstance(value, str):
        if _ISO_RE.match(value.strip()):
            dt = _parse_instant(value)
            if dt is not None:
                return (0, _epoch_ms(dt))
        return (1, value)
    return None


class _Reverse:
    """Inverts comparison, for descending keys inside a composite sort key."""

    __slots__ = ("v",)

    def __init__(self, v: Any) -> None:
        self.v = v

    def __lt__(self, other: _Reverse) -> bool:
        return bool(other.v < self.v)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Reverse) and other.v == self.v


def execute(query: SearchQuery, docs: Iterable[tuple[str, Mapping[str, Any]]]) -> SearchResult:
    """Evaluate ``query`` over ``(id, _source)`` pairs, in their given order.

    Default order is ``_score`` descending, ties kept in input order.  Field
    sorts put missing values last (``"missing": "_first"`` to override); a
    multi-valued field sorts by its min (asc) or max (desc).
    """
    matched: list[tuple[int, str, Mapping[str, Any], float]] = []
    for pos, (doc_id, src) in enumerate(docs):
        score = query.query.score(doc_id, src)
        if score is not None:
            matched.append((pos, doc_id, src, float(score)))

    specs = query.sort or (SortSpec("_score", "desc"),)

    def key(row: tuple[int, str, Mapping[str, Any], float]) -> tuple[Any, ...]:
        pos, doc_id, src, score = row
        parts: list[Any] = []
        for spec in specs:
            if spec.field == "_score":
                v: Any = (0, score)
                missing = False
            elif spec.field == "_doc":
                v, missing = (0, float(pos)), False
            else:
                v = _sort_value(src, doc_id, spec)
                missing = v is _MISSING
            rank = (0 if spec.missing == "_first" else 1) if missing else (1 if spec.missing == "_first" else 0)
            if missing:
                parts.append((rank, 0))
            else:
                parts.append((rank, v if spec.order == "asc" else _Reverse(v)))
        parts.append(pos)
        return tuple(parts)

    matched.sort(key=key)
    track = query.scores_tracked
    max_score = max((m[3] for m in matched), default=None) if track else None
    page = matched[query.from_ : query.from_ + query.size]
    hits = []
    for pos, doc_id, src, score in page:
        sort_values: tuple[Any, ...] | None = None
        if query.sort:
            sort_values = tuple(_sort_output(src, doc_id, pos, score, s) for s in query.sort)
        hits.append(Hit(id=doc_id, score=score if track else None, source=query.source.apply(src), sort=sort_values))
    return SearchResult(total=len(matched), max_score=max_score, hits=tuple(hits))


def _sort_output(src: Mapping[str, Any], doc_id: str, pos: int, score: float, spec: SortSpec) -> Any:
    """The value OpenSearch reports in ``hits.hits[].sort`` (dates as epoch millis)."""
    if spec.field == "_score":
        return score
    if spec.field == "_doc":
        return pos
    v = _sort_value(src, doc_id, spec)
    if v is _MISSING:
        return None
    if spec.field == "_id":
        return v
    kind, raw = v
    if kind == 0:
        if any(isinstance(x, str) for x in _field_values(src, spec.field)):
            return int(math.floor(raw))  # a date: epoch millis, as a long
        return int(raw) if float(raw).is_integer() else raw
    return raw


def search_response(
    result: SearchResult,
    took_ms: int,
    *,
    index: str,
    hit_extras: Callable[[str], Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """The OpenSearch search response body for ``result``.

    ``index`` is the ``_index`` reported on every hit (:data:`META_INDEX` or
    :data:`MESSAGE_INDEX`).  ``hit_extras(id)`` may add keys such as
    ``_version``, ``_seq_no``, ``_primary_term`` (ml-commons requests them),
    placed between ``_id`` and ``_score`` as OpenSearch orders them.
    """
    hits = []
    for h in result.hits:
        hit: dict[str, Any] = {"_index": index, "_id": h.id}
        if hit_extras is not None:
            hit.update(hit_extras(h.id))
        hit["_score"] = h.score
        if h.source is not None:
            hit["_source"] = h.source
        if h.sort is not None:
            hit["sort"] = list(h.sort)
        hits.append(hit)
    return {
        "took": int(took_ms),
        "timed_out": False,
        "_shards": {"total": 1, "successful": 1, "skipped": 0, "failed": 0},
        "hits": {
            "total": {"value": result.total, "relation": "eq"},
            "max_score": result.max_score,
            "hits": hits,
        },
    }


def search(
    body: Mapping[str, Any] | None,
    docs: Iterable[tuple[str, Mapping[str, Any]]],
    *,
    index: str,
    took_ms: int = 0,
    max_size: int = MAX_RESULT_WINDOW,
) -> dict[str, Any]:
    """Convenience: parse, execute and render in one call."""
    return search_response(execute(parse_search(body, max_size=max_size), docs), took_ms, index=index)
